package supervisor

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func TestSupervisor_Drain(t *testing.T) {
	t.Run("IgnoresTerm", func(t *testing.T) {
		// Ensure a child that ignores SIGTERM is killed after the grace, its
		// run abandoned at once with the attempt refunded, while a child
		// that ends on SIGTERM and one that finishes in time are settled too.
		t.Parallel()
		h := MustHarness(t, nil)
		ready := filepath.Join(t.TempDir(), "ready")
		stubborn := h.start("trap '' TERM; echo $$ > "+ready+"; while :; do sleep 0.1; done", "{}", Spec{})
		polite := h.start("sleep 300", "{}", Spec{})
		pid := MustReadPID(t, ready)
		h.s.Drain(time.Second, nil)
		MustDie(t, pid, "TERM-ignoring child")
		for _, l := range []*lease.Lease{stubborn, polite} {
			r := h.waitRun(l.RunID)
			if r.State != lease.RunAbandoned || r.Summary != "supervisor shutdown" {
				t.Fatalf("run %d = %s %q, want abandoned \"supervisor shutdown\"", l.RunID, r.State, r.Summary)
			}
			if task := h.task(l.TaskID); task.State != lease.TaskQueued || task.Attempts != 0 {
				t.Fatalf("task %d = %s after %d attempts, want queued and refunded", l.TaskID, task.State, task.Attempts)
			}
		}
		if r := h.waitRun(stubborn.RunID); r.Signal != "SIGKILL" {
			t.Fatalf("stubborn child signal = %q, want SIGKILL", r.Signal)
		}
	})

	t.Run("FinishesInGrace", func(t *testing.T) {
		// Ensure a child that handles SIGTERM by finishing its work and
		// exiting 0 completes its run.
		t.Parallel()
		h := MustHarness(t, nil)
		ready := filepath.Join(t.TempDir(), "ready")
		l := h.start("trap 'echo wrapped up; exit 0' TERM; echo $$ > "+ready+"; while :; do sleep 0.1; done", "{}", Spec{})
		MustReadPID(t, ready)
		h.s.Drain(30*time.Second, nil)
		if r := h.waitRun(l.RunID); r.State != lease.RunCompleted || r.Summary != "wrapped up" {
			t.Fatalf("run = %s %q, want completed \"wrapped up\"", r.State, r.Summary)
		}
	})

	t.Run("Hurry", func(t *testing.T) {
		// Ensure closing hurry (a second signal) skips the rest of a long
		// grace.
		t.Parallel()
		h := MustHarness(t, nil)
		ready := filepath.Join(t.TempDir(), "ready")
		l := h.start("trap '' TERM; echo $$ > "+ready+"; while :; do sleep 0.1; done", "{}", Spec{})
		MustReadPID(t, ready)
		hurry := make(chan struct{})
		done := make(chan struct{})
		go func() {
			h.s.Drain(time.Hour, hurry)
			close(done)
		}()
		time.Sleep(200 * time.Millisecond)
		close(hurry)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Drain still waiting 30s after hurry closed")
		}
		if r := h.waitRun(l.RunID); r.State != lease.RunAbandoned {
			t.Fatalf("run = %s, want abandoned", r.State)
		}
	})

	t.Run("ProviderDown", func(t *testing.T) {
		// Ensure Drain ends even when the provider refuses every
		// settlement, leaving the lease to expire.
		t.Parallel()
		h := MustHarness(t, func(f *fakeProvider) {
			f.SettleFn = func(context.Context, ...lease.Settlement) ([]error, error) {
				return nil, errors.New("connection refused")
			}
		})
		l := h.start("sleep 300", "{}", Spec{Lease: time.Minute})
		waitStarted(t, h)
		done := make(chan struct{})
		go func() {
			h.s.Drain(100*time.Millisecond, nil)
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatal("Drain did not return with the provider down")
		}
		r, err := h.mem.Run(context.Background(), l.RunID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != lease.RunRunning {
			t.Fatalf("run = %s, want still running in the queue (lease left to expire)", r.State)
		}
	})
}

func waitStarted(t *testing.T, h *harness) {
	t.Helper()
	for range 1000 {
		if snap := h.s.Snapshot(); len(snap) > 0 && snap[0].PID > 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("child never started")
}

func TestSupervisor_KillOrphans(t *testing.T) {
	// Ensure leftover groups of an earlier incarnation are killed (a live
	// leader, or members whose leader is gone), a recycled pid is left
	// alone, and every record is removed.
	state := t.TempDir()
	s, err := New(Config{Provider: &fakeProvider{}, Logger: MustLogger(t), StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	deadDaemon := exitedPID(t)

	leader := startGroup(t, "sleep 300")
	writeRecord(t, state, 1, deadDaemon, leader.Process.Pid, 0)

	recycled := startGroup(t, "sleep 300")
	writeRecord(t, state, 2, deadDaemon, recycled.Process.Pid, 1)

	// A group whose leader died (as a parent-death signal would kill it)
	// while a grandchild lives on.
	pidFile := filepath.Join(t.TempDir(), "gc")
	orphaned := startGroup(t, "sleep 300 & echo $! > "+pidFile+"; sleep 0.5")
	grandchild := MustReadPID(t, pidFile)
	writeRecord(t, state, 3, deadDaemon, orphaned.Process.Pid, 0)
	orphaned.Wait()

	killed, err := s.KillOrphans()
	if err != nil {
		t.Fatal(err)
	}
	if killed != 2 {
		t.Errorf("killed = %d, want 2", killed)
	}
	MustDie(t, leader.Process.Pid, "recorded leader")
	MustDie(t, grandchild, "member of a group whose leader is gone")
	if !alive(recycled.Process.Pid) {
		t.Error("process with a recycled pid was killed")
	}
	if ents, _ := os.ReadDir(childrenDir(state)); len(ents) != 0 {
		t.Errorf("%d records left, want none", len(ents))
	}
}

// startGroup starts sh -c script in a group of its own, to be killed at
// cleanup.
func startGroup(t *testing.T, script string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	return cmd
}

// exitedPID returns the pid of a process that has exited.
func exitedPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("/bin/true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// writeRecord records pid as the leader of a group, its start time off by
// skew.
func writeRecord(t *testing.T, state string, runID int64, daemon, pid int, skew uint64) {
	t.Helper()
	start, ok := procStart(pid)
	if !ok {
		t.Fatalf("pid %d not running", pid)
	}
	c := childRecord{Boot: bootID(), DaemonPID: daemon, PGID: pid, PID: pid, Start: start + skew, RunID: runID}
	if err := os.WriteFile(recordPath(state, runID), []byte(c.encode()), 0o600); err != nil {
		t.Fatal(err)
	}
}
