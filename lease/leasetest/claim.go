package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure a claim with nothing eligible returns ErrNoWork and changes no task.
func testClaimEmptyIsNotAnError(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustNoWork(t, p, claimIn())
	if got, err := p.ClaimMany(ctx, claimIn(), 3); err != nil || len(got) != 0 {
		t.Fatalf("claim many from an empty queue: got %d leases, error %v; want none and nil", len(got), err)
	}

	later := task("empty-later", "a")
	later.Delay = time.Hour
	mustEnqueue(t, p, later)
	paused := true
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "empty-paused", Paused: &paused}); err != nil {
		t.Fatalf("pause lane: %v", err)
	}
	mustEnqueue(t, p, task("empty-paused", "a"))
	mustEnqueue(t, p, task("empty-other", "b"))
	mustEnqueue(t, p, task("empty-full", "a"))
	mustEnqueue(t, p, task("empty-full", "a"))
	held := MustClaim(t, p, claimIn("empty-full"))

	before := mustTasks(t, p, lease.TaskFilter{})
	runs := len(mustRuns(t, p, lease.RunFilter{}))
	a := claimIn()
	a.Agent = "a"
	mustNoWork(t, p, a)
	mustNoWork(t, p, claimIn("no-such-lane"))
	b := claimIn("empty-later", "empty-paused", "empty-full")
	b.Agent = "b"
	mustNoWork(t, p, b)
	if got, err := p.ClaimMany(ctx, a, 5); err != nil || len(got) != 0 {
		t.Fatalf("claim many for agent a: got %d leases, error %v; want none and nil", len(got), err)
	}

	after := mustTasks(t, p, lease.TaskFilter{})
	if len(after) != len(before) {
		t.Fatalf("claims that found nothing changed the task count from %d to %d", len(before), len(after))
	}
	for i := range before {
		x, y := before[i], after[i]
		if x.ID != y.ID || x.State != y.State || x.Attempts != y.Attempts || !x.UpdatedAt.Equal(y.UpdatedAt) || !x.RunAfter.Equal(y.RunAfter) {
			t.Errorf("claims that found nothing changed task %d:\nbefore %+v\nafter  %+v", x.ID, x, y)
		}
	}
	if got := len(mustRuns(t, p, lease.RunFilter{})); got != runs {
		t.Errorf("claims that found nothing changed the run count from %d to %d", runs, got)
	}
	if r := MustRun(t, p, held.RunID); r.State != lease.RunRunning {
		t.Errorf("held run %d: state %s, want running", held.RunID, r.State)
	}
}

// Ensure a claim takes the lowest priority number, then the oldest
// run_after, then the lowest id, and never a task whose run_after is ahead.
func testClaimOrder(t *testing.T, p lease.Provider) {
	mustSetLane(t, p, "order", 20)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	at := func(prio int, runAfter time.Time) lease.EnqueueParams {
		ep := task("order", "a")
		ep.Priority, ep.RunAfter = prio, runAfter
		return ep
	}
	t1 := mustEnqueue(t, p, at(0, base.Add(3*time.Minute)))
	t2 := mustEnqueue(t, p, at(0, base.Add(time.Minute)))
	t3 := mustEnqueue(t, p, at(-5, base.Add(5*time.Minute)))
	t4 := mustEnqueue(t, p, at(0, base.Add(time.Minute)))
	t5 := mustEnqueue(t, p, at(10, base))
	mustEnqueue(t, p, at(-10, time.Now().Add(time.Hour)))
	delayed := at(-10, time.Time{})
	delayed.Delay = time.Hour
	mustEnqueue(t, p, delayed)
	t8 := mustEnqueue(t, p, at(0, time.Time{}))

	for i, want := range []int64{t3, t2, t4, t1, t8, t5} {
		if got := MustClaim(t, p, claimIn("order")); got.TaskID != want {
			t.Fatalf("claim %d: got task %d, want %d (order t3 t2 t4 t1 t8 t5 = %d %d %d %d %d %d)",
				i+1, got.TaskID, want, t3, t2, t4, t1, t8, t5)
		}
	}
	mustNoWork(t, p, claimIn("order"))

	mustSetLane(t, p, "order-agent", 5)
	mustEnqueue(t, p, task("order-agent", "x"))
	ep := task("order-agent", "y")
	ep.Priority = 1
	y := mustEnqueue(t, p, ep)
	cp := claimIn("order-agent")
	cp.Agent = "y"
	if got := MustClaim(t, p, cp); got.TaskID != y {
		t.Fatalf("claim for agent y: got task %d, want %d", got.TaskID, y)
	}
}

// Ensure a lease and its run carry what was enqueued and claimed.
func testClaimLease(t *testing.T, p lease.Provider) {
	ep := lease.EnqueueParams{Lane: "fields", Agent: "agent-1", Payload: []byte(`{"k":"v"}`), Priority: 3, MaxAttempts: 4}
	id := mustEnqueue(t, p, ep)
	cp := lease.ClaimParams{Lanes: []string{"fields"}, Agent: "agent-1", Owner: "owner-1", Instance: "inst-1", Lease: time.Minute}
	l := MustClaim(t, p, cp)
	if l.TaskID != id || l.RunID == 0 || l.Lane != "fields" || l.Agent != "agent-1" || l.Attempt != 1 ||
		l.MaxAttempts != 4 || l.Priority != 3 || string(l.Payload) != `{"k":"v"}` || l.Owner != "owner-1" {
		t.Fatalf("lease: got %+v", l)
	}
	r := MustRun(t, p, l.RunID)
	if r.TaskID != id || r.Lane != "fields" || r.Agent != "agent-1" || r.Attempt != 1 || r.Owner != "owner-1" ||
		r.Instance != "inst-1" || r.State != lease.RunRunning || r.ExitCode != nil || !r.FinishedAt.IsZero() {
		t.Fatalf("run: got %+v", r)
	}
	if !near(r.LeaseExpiresAt, l.LeaseExpiresAt, time.Millisecond) {
		t.Errorf("run lease expires at %v, lease says %v", r.LeaseExpiresAt, l.LeaseExpiresAt)
	}
	if !near(r.LeaseExpiresAt, r.StartedAt.Add(time.Minute), time.Second) || r.LastHeartbeatAt.IsZero() {
		t.Errorf("run started %v, last heartbeat %v, lease expires %v; want a one-minute lease", r.StartedAt, r.LastHeartbeatAt, r.LeaseExpiresAt)
	}
	if r.LeaseLeft <= 0 || r.LeaseLeft > time.Minute || r.SilentSeconds < 0 || r.SilentSeconds > 30 {
		t.Errorf("run lease left %s, silent %.1fs; want within the minute", r.LeaseLeft, r.SilentSeconds)
	}
	tk := wantState(t, p, id, lease.TaskRunning)
	if tk.Attempts != 1 {
		t.Errorf("task attempts %d, want 1", tk.Attempts)
	}
}
