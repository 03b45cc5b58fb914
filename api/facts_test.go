package api

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// MustObject encodes v and decodes it as one JSON object.
func MustObject(tb testing.TB, v any) map[string]any {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatalf("encode %T: %v", v, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		tb.Fatalf("decode %T: %v", v, err)
	}
	return m
}

func keysOf(m map[string]any) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func TestFacts_SameKeysWhateverTheyHold(t *testing.T) {
	// Ensure a fact's JSON has the same fields whether it holds nothing
	// optional or everything: what is not there is null or "", never left
	// out.
	now := time.Now()
	cpu, peak, code, parent := 1500*time.Millisecond, int64(1<<20), 3, int64(9)
	for _, tt := range []struct {
		name       string
		bare, full any
	}{
		{"Task",
			TaskOf(lease.Task{ID: 1, Payload: json.RawMessage(`{}`)}),
			TaskOf(lease.Task{ID: 2, Payload: json.RawMessage(`{}`), DedupeKey: "k", ParentRun: parent, FinishedAt: now, LastSummary: "s"})},
		{"Run",
			RunOf(lease.Run{ID: 1, State: lease.RunRunning}),
			RunOf(lease.Run{ID: 2, State: lease.RunFailed, PID: 7, FinishedAt: now, ExitCode: &code, Signal: "SIGKILL",
				LogError: "disk full", CPUTime: &cpu, MemoryPeak: &peak})},
		{"LiveRun",
			LiveRunOf(lease.Run{ID: 1, StartedAt: now}, now),
			LiveRunOf(lease.Run{ID: 2, StartedAt: now, PID: 7, LastOutputAt: now, CPUTime: &cpu}, now)},
		{"Lane", LaneOf(lease.Lane{Name: "a"}), LaneOf(lease.Lane{Name: "b", OldestQueued: now, SetBy: "qd lane set"})},
		{"Periodic", PeriodicOf(lease.PeriodicRecord{Name: "p"}),
			Periodic{Name: "q", Schedule: "@daily", NextTick: When(now), LastTick: When(now)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := keysOf(MustObject(t, tt.bare)), keysOf(MustObject(t, tt.full)); !slices.Equal(got, want) {
				t.Errorf("keys of a bare %s %v, of a full one %v", tt.name, got, want)
			}
		})
	}
}

func TestRunOf_Nulls(t *testing.T) {
	// Ensure what a run lacks is null: the usage of a run without a
	// cgroup, the silence and lease left of one that ended, the pid of one
	// claimed by a script; and that what it has is there.
	cpu, peak := 1500*time.Millisecond, int64(1<<20)
	measured := MustObject(t, RunOf(lease.Run{ID: 1, State: lease.RunCompleted, CPUTime: &cpu, MemoryPeak: &peak, FinishedAt: time.Now()}))
	if measured["cpu_seconds"] != 1.5 || measured["memory_peak_bytes"] != float64(1<<20) {
		t.Errorf("measured run: cpu_seconds %v, memory_peak_bytes %v; want 1.5 and 1048576", measured["cpu_seconds"], measured["memory_peak_bytes"])
	}
	for _, key := range []string{"silent_seconds", "lease_left_seconds", "pid", "exit_code"} {
		if v, ok := measured[key]; !ok || v != nil {
			t.Errorf("ended run: %s = %v (present %v), want null", key, v, ok)
		}
	}
	live := MustObject(t, RunOf(lease.Run{ID: 2, State: lease.RunRunning, SilentSeconds: 2, LeaseLeft: 3 * time.Second}))
	if live["silent_seconds"] != 2.0 || live["lease_left_seconds"] != 3.0 || live["finished_at"] != nil || live["cpu_seconds"] != nil {
		t.Errorf("running run: %v; want silent_seconds 2, lease_left_seconds 3, finished_at and cpu_seconds null", live)
	}
}
