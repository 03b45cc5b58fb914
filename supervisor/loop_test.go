package supervisor

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func TestSupervisor_Heartbeat(t *testing.T) {
	t.Run("KeepsLeaseAlive", func(t *testing.T) {
		// Ensure heartbeats keep a 2s lease alive for a 5s child, so the
		// run completes instead of losing its lease.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("sleep 5; echo survived", "{}", Spec{Lease: 2 * time.Second})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted || r.Summary != "survived" {
			t.Fatalf("run = %s %q, want completed \"survived\"", r.State, r.Summary)
		}
		if r.PID == 0 || r.LastHeartbeatAt.IsZero() {
			t.Fatalf("run pid %d, last heartbeat %v: want both recorded by heartbeats", r.PID, r.LastHeartbeatAt)
		}
		if h.loops.Load() < 5 {
			t.Fatalf("OnLoop called %d times in 5s, want at least once a second", h.loops.Load())
		}
	})

	t.Run("IdleSleeps", func(t *testing.T) {
		// Ensure the loop with no live run sleeps instead of passing every
		// second, and that a run started wakes it and is heartbeated.
		t.Parallel()
		h := MustHarness(t, nil)
		time.Sleep(2500 * time.Millisecond)
		if n := h.loops.Load(); n > 1 {
			t.Errorf("OnLoop called %d times in 2.5s with no run, want at most the first pass", n)
		}
		l := h.start("sleep 3; echo done", "{}", Spec{Lease: 2 * time.Second})
		if r := h.waitRun(l.RunID); r.State != lease.RunCompleted || r.LastHeartbeatAt.IsZero() {
			t.Fatalf("run = %s, last heartbeat %v: want completed and heartbeated", r.State, r.LastHeartbeatAt)
		}
	})

	t.Run("Batched", func(t *testing.T) {
		// Ensure live runs started at different times come to share one
		// Heartbeat call per interval.
		t.Parallel()
		var mu sync.Mutex
		most := 0
		h := MustHarness(t, func(f *fakeProvider) {
			f.HeartbeatFn = func(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
				mu.Lock()
				most = max(most, len(beats))
				mu.Unlock()
				return f.Provider.Heartbeat(ctx, beats...)
			}
		})
		var ls []*lease.Lease
		for range 4 {
			ls = append(ls, h.start("sleep 5", "{}", Spec{Lease: 3 * time.Second}))
			time.Sleep(250 * time.Millisecond)
		}
		for _, l := range ls {
			if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
				t.Fatalf("run %d = %s, want completed", l.RunID, r.State)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if most != 4 {
			t.Fatalf("largest heartbeat batch = %d runs, want all 4", most)
		}
	})
}

func TestSupervisor_Fencing(t *testing.T) {
	t.Run("ProviderUnreachable", func(t *testing.T) {
		// Ensure that when no heartbeat gets through, the child's group is
		// killed before its lease would expire.
		t.Parallel()
		h := MustHarness(t, func(f *fakeProvider) {
			f.HeartbeatFn = func(context.Context, ...lease.Beat) ([]lease.BeatResult, error) {
				return nil, errors.New("dial tcp 127.0.0.1:5432: connection refused")
			}
		})
		pidFile := filepath.Join(t.TempDir(), "gc")
		start := time.Now()
		l := h.start("sleep 300 & echo $! > "+pidFile+"; sleep 300", "{}", Spec{Lease: 2 * time.Second})
		gc := MustReadPID(t, pidFile)
		r := h.waitRun(l.RunID)
		MustDie(t, gc, "grandchild")
		if r.State != lease.RunAbandoned || !strings.Contains(r.Summary, "no heartbeat answer") {
			t.Fatalf("run = %s %q, want abandoned for want of heartbeats", r.State, r.Summary)
		}
		if r.Signal != "SIGKILL" {
			t.Fatalf("signal = %q, want SIGKILL", r.Signal)
		}
		if !r.FinishedAt.Before(start.Add(2 * time.Second)) {
			t.Fatalf("run settled %v after the claim, want before its 2s lease ran out", r.FinishedAt.Sub(start))
		}
	})

	t.Run("LeaseLost", func(t *testing.T) {
		// Ensure a heartbeat answered with ErrLeaseLost kills the child's
		// group and settles nothing over the new owner's state.
		t.Parallel()
		h := MustHarness(t, nil)
		pidFile := filepath.Join(t.TempDir(), "gc")
		l := h.start("sleep 300 & echo $! > "+pidFile+"; sleep 300", "{}", Spec{Lease: 3 * time.Second})
		gc := MustReadPID(t, pidFile)
		if _, err := h.mem.AbandonOwner(context.Background(), "test", []string{"i1"}, "reaped elsewhere"); err != nil {
			t.Fatal(err)
		}
		MustDie(t, gc, "grandchild")
		h.waitGone()
		r := h.waitRun(l.RunID)
		if r.State != lease.RunAbandoned || r.Summary != "reaped elsewhere" {
			t.Fatalf("run = %s %q, want the reaper's record untouched", r.State, r.Summary)
		}
	})

	t.Run("Cancel", func(t *testing.T) {
		// Ensure a cancel request seen on a heartbeat stops the group and
		// settles the run as cancelled.
		t.Parallel()
		h := MustHarness(t, nil)
		pidFile := filepath.Join(t.TempDir(), "gc")
		l := h.start("sleep 300 & echo $! > "+pidFile+"; sleep 300", "{}",
			Spec{Lease: 3 * time.Second, KillGrace: time.Second})
		gc := MustReadPID(t, pidFile)
		if _, err := h.mem.Cancel(context.Background(), l.TaskID); err != nil {
			t.Fatal(err)
		}
		r := h.waitRun(l.RunID)
		MustDie(t, gc, "grandchild")
		if r.State != lease.RunCancelled {
			t.Fatalf("run = %s %q, want cancelled", r.State, r.Summary)
		}
		if got := h.task(l.TaskID).State; got != lease.TaskCancelled {
			t.Fatalf("task = %s, want cancelled", got)
		}
	})
}

// Ensure a heartbeat that reaches the queue after the run's own
// settlement, and is refused as lease lost, is no loss: the run stays
// completed, its end says no lease was lost, and nothing is logged as an
// error.
func TestSupervisor_HeartbeatOvertakenBySettle(t *testing.T) {
	t.Parallel()
	settled := make(chan struct{})
	var once sync.Once
	h := MustHarness(t, func(f *fakeProvider) {
		f.HeartbeatFn = func(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
			select { // the heartbeat in flight as the child exits arrives late
			case <-settled:
			case <-time.After(5 * time.Second):
			}
			return f.Provider.Heartbeat(ctx, beats...)
		}
		f.SettleFn = func(ctx context.Context, s ...lease.Settlement) ([]error, error) {
			errs, err := f.Provider.Settle(ctx, s...)
			once.Do(func() { close(settled) })
			return errs, err
		}
	})
	l := h.start("sleep 0.3", "{}", Spec{Lease: 3 * time.Second, Heartbeat: 50 * time.Millisecond})
	if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
		t.Fatalf("run = %s %q, want completed", r.State, r.Summary)
	}
	h.waitGone()
	var e End
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var ok bool
		if e, ok = h.endOf(l.RunID); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("OnEnd was not told of the run")
		}
	}
	if e.LeaseLost() || e.Reason != "" {
		t.Errorf("end of a run that completed: reason %q, lease lost %v; want neither", e.Reason, e.LeaseLost())
	}
	time.Sleep(200 * time.Millisecond) // the late heartbeat's answer
	if log := h.log.text(); strings.Contains(log, "[ERROR]") {
		t.Errorf("a normal end logged an error:\n%s", log)
	}
}

func TestSupervisor_Settle(t *testing.T) {
	t.Run("GroupCommit", func(t *testing.T) {
		// Ensure runs that end while a Settle call is in flight are settled
		// together in the next call.
		t.Parallel()
		var mu sync.Mutex
		var sizes []int
		h := MustHarness(t, func(f *fakeProvider) {
			f.SettleFn = func(ctx context.Context, s ...lease.Settlement) ([]error, error) {
				mu.Lock()
				sizes = append(sizes, len(s))
				mu.Unlock()
				time.Sleep(500 * time.Millisecond)
				return f.Provider.Settle(ctx, s...)
			}
		})
		var ls []*lease.Lease
		for range 5 {
			ls = append(ls, h.start("exit 0", "{}", Spec{}))
		}
		for _, l := range ls {
			if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
				t.Fatalf("run %d = %s, want completed", l.RunID, r.State)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(sizes) >= 5 {
			t.Fatalf("Settle batches = %v, want runs settled together", sizes)
		}
	})

	t.Run("RetriedAfterError", func(t *testing.T) {
		// Ensure a settlement refused by a provider error is retried until
		// it lands.
		t.Parallel()
		var mu sync.Mutex
		fails := 2
		h := MustHarness(t, func(f *fakeProvider) {
			f.SettleFn = func(ctx context.Context, s ...lease.Settlement) ([]error, error) {
				mu.Lock()
				defer mu.Unlock()
				if fails > 0 {
					fails--
					return nil, errors.New("connection reset by peer")
				}
				return f.Provider.Settle(ctx, s...)
			}
		})
		l := h.start("echo ok", "{}", Spec{})
		if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
			t.Fatalf("run = %s, want completed after retries", r.State)
		}
	})
}

func TestSupervisor_Progress(t *testing.T) {
	// Ensure progress reported for a quiet child keeps StallTimeout from
	// abandoning it, and an unknown run is refused.
	t.Parallel()
	h := MustHarness(t, nil)
	l := h.start("sleep 3; echo done", "{}", Spec{StallTimeout: time.Second, KillGrace: time.Second})
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				h.s.Progress(l.RunID)
			}
		}
	}()
	if r := h.waitRun(l.RunID); r.State != lease.RunCompleted || r.Summary != "done" {
		t.Fatalf("run = %s %q, want completed \"done\"", r.State, r.Summary)
	}
	if err := h.s.Progress(l.RunID + 100); !errors.Is(err, ErrUnknownRun) {
		t.Fatalf("Progress(unknown) = %v, want ErrUnknownRun", err)
	}
}

// Ensure a cancel request reaches a child well before its next heartbeat:
// through the poll within about a second when it was made elsewhere, and
// at once through CancelTask on this host.
func TestSupervisor_CancelWithoutHeartbeat(t *testing.T) {
	t.Run("Poll", func(t *testing.T) {
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("sleep 300", "{}", Spec{Lease: time.Minute, Heartbeat: 20 * time.Second})
		time.Sleep(300 * time.Millisecond)
		begin := time.Now()
		if _, err := h.mem.Cancel(context.Background(), l.TaskID); err != nil {
			t.Fatal(err)
		}
		r := h.waitRun(l.RunID)
		took := time.Since(begin)
		if r.State != lease.RunCancelled {
			t.Fatalf("run = %s %q, want cancelled", r.State, r.Summary)
		}
		if took > 3*time.Second {
			t.Errorf("cancel made elsewhere took %s to stop the child; the poll runs every second", took)
		}
		t.Logf("cancel by poll: %s", took.Round(time.Millisecond))
	})
	t.Run("CancelTask", func(t *testing.T) {
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("sleep 300", "{}", Spec{Lease: time.Minute, Heartbeat: 20 * time.Second})
		time.Sleep(300 * time.Millisecond)
		if _, err := h.mem.Cancel(context.Background(), l.TaskID); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		if got := h.s.CancelTask(l.TaskID); got != l.RunID {
			t.Fatalf("CancelTask(%d) = %d, want run %d", l.TaskID, got, l.RunID)
		}
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCancelled {
			t.Fatalf("run = %s %q, want cancelled", r.State, r.Summary)
		}
		t.Logf("cancel through CancelTask: %s", time.Since(begin).Round(time.Millisecond))
		if got := h.s.CancelTask(l.TaskID + 1000); got != 0 {
			t.Errorf("CancelTask of a task not run here = %d, want 0", got)
		}
	})
}

// Ensure a child that exits 75 defers its task: abandoned and deferred,
// its attempt given back, queued again after the delay Defer asked for,
// or after retry_backoff without one.
func TestSupervisor_Defer(t *testing.T) {
	t.Parallel()
	h := MustHarness(t, nil)
	bare := h.start("exit 75", "{}", Spec{RetryBackoff: 40 * time.Second})
	asked := h.start("sleep 0.3; exit 75", "{}", Spec{RetryBackoff: 40 * time.Second})
	if err := h.s.Defer(asked.RunID, 2*time.Hour); err != nil {
		t.Fatalf("Defer: %v", err)
	}
	if err := h.s.Defer(999999, time.Second); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("Defer of a run not running: %v, want ErrUnknownRun", err)
	}
	for _, c := range []struct {
		l    *lease.Lease
		wait time.Duration
	}{{bare, 40 * time.Second}, {asked, 2 * time.Hour}} {
		r := h.waitRun(c.l.RunID)
		tk, err := h.mem.Task(context.Background(), c.l.TaskID)
		if err != nil {
			t.Fatal(err)
		}
		if r.State != lease.RunAbandoned || !r.Deferred || tk.Attempts != 0 || tk.State != lease.TaskQueued {
			t.Errorf("run %d: %s, deferred %v; task %s with %d attempts; want abandoned, deferred, queued with 0",
				r.ID, r.State, r.Deferred, tk.State, tk.Attempts)
		}
		if in := time.Until(tk.RunAfter); in < c.wait-5*time.Second || in > c.wait {
			t.Errorf("run %d: task due in %s, want about %s", r.ID, in, c.wait)
		}
	}
}
