package ui

import (
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

func TestRunRow_CPU(t *testing.T) {
	// Ensure a run in flight shows the CPU time its daemon reports, and "-"
	// where the daemon reports none or cannot be asked.
	run := lease.Run{ID: 7, TaskID: 3, Lane: "l", Agent: "a", StartedAt: time.Now().Add(-time.Minute)}
	cpu := 1.5
	pid, now := 42, time.Now()
	live := map[int64]api.LiveRun{7: {RunID: 7, PID: &pid, CPUSeconds: &cpu}}
	if got := runRow(run, "h", live, now); got.CPU() != "1.5s" || got.CPUSeconds == nil || *got.CPUSeconds != 1.5 {
		t.Errorf("run with its daemon's CPU time: cpu %q (%v), want 1.5s", got.CPU(), got.CPUSeconds)
	}
	if got := runRow(run, "h", map[int64]api.LiveRun{7: {RunID: 7}}, now); got.CPU() != "-" {
		t.Errorf("run whose daemon reports no CPU time: cpu %q, want -", got.CPU())
	}
	if got := runRow(run, "h", nil, now); got.CPU() != "-" {
		t.Errorf("run whose daemon cannot be asked: cpu %q, want -", got.CPU())
	}
}
