package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure pausing a lane stops claims in it and its limit can be raised and
// lowered at any time.
func testLanesPauseAndLimit(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	for range 5 {
		mustEnqueue(t, p, task("pl", "a"))
	}
	set := func(u lease.LaneUpdate) lease.Lane {
		t.Helper()
		l, err := p.SetLane(ctx, u)
		if err != nil {
			t.Fatalf("set lane %+v: %v", u, err)
		}
		return l
	}
	yes, no, three, one := true, false, 3, 1
	if l := set(lease.LaneUpdate{Name: "pl", Paused: &yes}); !l.Paused || l.MaxRunning != 1 {
		t.Fatalf("paused lane: got %+v, want paused with limit 1", l)
	}
	mustNoWork(t, p, claimIn("pl"))
	mustNoWork(t, p, claimIn())
	if l := set(lease.LaneUpdate{Name: "pl", Paused: &no}); l.Paused {
		t.Fatalf("resumed lane: got %+v", l)
	}
	first := MustClaim(t, p, claimIn("pl"))
	mustNoWork(t, p, claimIn("pl"))
	if l := set(lease.LaneUpdate{Name: "pl", MaxRunning: &three}); l.MaxRunning != 3 || l.Paused {
		t.Fatalf("lane with a new limit: got %+v", l)
	}
	second, third := MustClaim(t, p, claimIn("pl")), MustClaim(t, p, claimIn("pl"))
	mustNoWork(t, p, claimIn("pl"))
	checkLane(t, p, "pl", lease.Lane{Name: "pl", MaxRunning: 3, Running: 3, Queued: 2})

	set(lease.LaneUpdate{Name: "pl", MaxRunning: &one})
	mustSettle(t, p, complete(first.RunID))
	mustSettle(t, p, complete(second.RunID))
	mustNoWork(t, p, claimIn("pl")) // one still running, limit 1
	set(lease.LaneUpdate{Name: "pl", Paused: &yes})
	if res := beat(t, p, lease.Beat{RunID: third.RunID, Lease: longLease}); res.Err != nil {
		t.Errorf("heartbeat in a paused lane: %v", res.Err)
	}
	mustSettle(t, p, complete(third.RunID))
	mustNoWork(t, p, claimIn("pl"))
	checkLane(t, p, "pl", lease.Lane{Name: "pl", MaxRunning: 1, Paused: true, Queued: 2})
	set(lease.LaneUpdate{Name: "pl", Paused: &no})
	MustClaim(t, p, claimIn("pl"))

	if l := set(lease.LaneUpdate{Name: "fresh", Paused: &yes}); l.MaxRunning != 1 || !l.Paused || l.Queued != 0 || l.SetBy != "" {
		t.Errorf("lane created by set lane: got %+v, want limit 1, paused, set by nobody named", l)
	}
	// Who set a lane last is kept until someone else names themselves.
	if l := set(lease.LaneUpdate{Name: "fresh", MaxRunning: &three, SetBy: "qd lane set"}); l.SetBy != "qd lane set" {
		t.Errorf("lane set by qd lane set: set by %q", l.SetBy)
	}
	set(lease.LaneUpdate{Name: "fresh", Paused: &no})
	checkLane(t, p, "fresh", lease.Lane{Name: "fresh", MaxRunning: 3, SetBy: "qd lane set"})
	set(lease.LaneUpdate{Name: "fresh", MaxRunning: &one, SetBy: "config /etc/qd/qd.hcl"})
	checkLane(t, p, "fresh", lease.Lane{Name: "fresh", MaxRunning: 1, SetBy: "config /etc/qd/qd.hcl"})
}

func checkLane(t *testing.T, p lease.Provider, name string, want lease.Lane) {
	t.Helper()
	lanes, err := p.Lanes(context.Background())
	if err != nil {
		t.Fatalf("lanes: %v", err)
	}
	for _, l := range lanes {
		if l.Name == name {
			if l.MaxRunning != want.MaxRunning || l.Paused != want.Paused || l.Running != want.Running || l.Queued != want.Queued ||
				(want.SetBy != "" && l.SetBy != want.SetBy) {
				t.Errorf("lane %s: got limit %d paused %v running %d queued %d set by %q; want %d %v %d %d %q", name,
					l.MaxRunning, l.Paused, l.Running, l.Queued, l.SetBy, want.MaxRunning, want.Paused, want.Running, want.Queued, want.SetBy)
			}
			return
		}
	}
	t.Errorf("lane %s missing from %+v", name, lanes)
}

// Ensure prune deletes only finished tasks old enough, with their runs, and
// that a dry run deletes nothing.
func testPrune(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustSetLane(t, p, "prune", 5)
	done := mustEnqueue(t, p, task("prune", "a"))
	doneRun := MustClaim(t, p, claimIn("prune"))
	mustSettle(t, p, complete(doneRun.RunID))
	ep := task("prune", "a")
	ep.MaxAttempts = 1
	failed := mustEnqueue(t, p, ep)
	failedRun := MustClaim(t, p, claimIn("prune"))
	mustSettle(t, p, lease.Settlement{RunID: failedRun.RunID, Outcome: lease.RunFailed})
	cancelled := mustEnqueue(t, p, task("prune", "a"))
	if _, err := p.Cancel(ctx, cancelled); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	running := mustEnqueue(t, p, task("prune", "a"))
	live := MustClaim(t, p, claimIn("prune"))
	queued := mustEnqueue(t, p, task("prune", "a"))

	if res, err := p.Prune(ctx, time.Hour, false); err != nil || res.Tasks != 0 || res.Runs != 0 {
		t.Fatalf("prune older than an hour: got %+v, %v; want nothing", res, err)
	}
	time.Sleep(100 * time.Millisecond)
	res, err := p.Prune(ctx, 10*time.Millisecond, true)
	if err != nil || res.Tasks != 3 || res.Runs != 2 {
		t.Fatalf("dry-run prune: got %+v, %v; want 3 tasks and 2 runs", res, err)
	}
	for _, id := range []int64{done, failed, cancelled} {
		MustTask(t, p, id)
	}
	res, err = p.Prune(ctx, 10*time.Millisecond, false)
	if err != nil || res.Tasks != 3 || res.Runs != 2 || fmt.Sprint(idsOf(res.RunIDs, func(id int64) int64 { return id })) !=
		fmt.Sprint(idsOf([]int64{doneRun.RunID, failedRun.RunID}, func(id int64) int64 { return id })) {
		t.Fatalf("prune: got %+v, %v; want 3 tasks and runs %d %d", res, err, doneRun.RunID, failedRun.RunID)
	}
	for _, id := range []int64{done, failed, cancelled} {
		if _, err := p.Task(ctx, id); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("pruned task %d: got %v, want ErrNotFound", id, err)
		}
	}
	for _, id := range []int64{doneRun.RunID, failedRun.RunID} {
		if _, err := p.Run(ctx, id); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("pruned run %d: got %v, want ErrNotFound", id, err)
		}
	}
	wantState(t, p, running, lease.TaskRunning)
	wantState(t, p, queued, lease.TaskQueued)
	MustRun(t, p, live.RunID)
	checkConsistent(t, p)
}

// Ensure one tick of a periodic schedule enqueues exactly once however many
// callers race for it, and that older ticks are refused.
func testPeriodicExactlyOnce(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	if last, err := p.PeriodicLast(ctx, "nightly"); err != nil || !last.IsZero() {
		t.Fatalf("last tick of a new schedule: got %v, %v; want zero", last, err)
	}
	// Ticks of the past: a provider may refuse one ahead of its clock.
	tick := time.Now().Add(-time.Hour).Truncate(time.Second)
	fire := func(tick time.Time, callers int) int64 {
		var won atomic.Int64
		race(callers, func(int) {
			ok, err := p.PeriodicTick(ctx, "nightly", tick, task("periodic", "cron"))
			if err != nil {
				t.Errorf("periodic tick: %v", err)
			}
			if ok {
				won.Add(1)
			}
		})
		return won.Load()
	}
	if won := fire(tick, 24); won != 1 {
		t.Fatalf("24 callers of one tick: %d enqueued, want 1", won)
	}
	if won := fire(tick.Add(-time.Minute), 4); won != 0 {
		t.Errorf("an older tick: %d enqueued, want 0", won)
	}
	next := tick.Add(time.Minute)
	if won := fire(next, 12); won != 1 {
		t.Errorf("12 callers of the next tick: %d enqueued, want 1", won)
	}
	if n := len(mustTasks(t, p, lease.TaskFilter{Lane: "periodic"})); n != 2 {
		t.Errorf("tasks enqueued by two ticks: %d, want 2", n)
	}
	if last, err := p.PeriodicLast(ctx, "nightly"); err != nil || !last.Equal(next) {
		t.Errorf("last tick: got %v, %v; want %v", last, err, next)
	}
	if ok, err := p.PeriodicTick(ctx, "weekly", tick, task("periodic", "cron")); err != nil || !ok {
		t.Errorf("first tick of another schedule: got %v, %v; want true", ok, err)
	}
}

// Ensure listings filter, order and return what was stored, payload byte
// for byte.
func testListings(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	raw := []byte("{\"b\": 2,  \"a\": [1, 2.50, \"\\u00e9\"],\n \"c\": {}}")
	mustSetLane(t, p, "list-1", 5)
	id := mustEnqueue(t, p, lease.EnqueueParams{Lane: "list-1", Agent: "a", Payload: raw, MaxAttempts: 3})
	if tk := MustTask(t, p, id); string(tk.Payload) != string(raw) {
		t.Errorf("stored payload: got %s, want %s", tk.Payload, raw)
	}
	for i := 1; i <= 3; i++ {
		l := MustClaim(t, p, claimIn("list-1"))
		if string(l.Payload) != string(raw) {
			t.Errorf("claimed payload: got %s, want %s", l.Payload, raw)
		}
		if i < 3 {
			mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, RetryIn: time.Millisecond})
			time.Sleep(20 * time.Millisecond)
		}
	}
	mustEnqueue(t, p, task("list-1", "a"))
	mustEnqueue(t, p, task("list-1", "b"))
	mustEnqueue(t, p, task("list-2", "a"))
	other := claimIn("list-2")
	other.Owner = "someone-else"
	MustClaim(t, p, other)

	for _, c := range []struct {
		f    lease.TaskFilter
		want int
	}{
		{lease.TaskFilter{}, 4},
		{lease.TaskFilter{Lane: "list-1"}, 3},
		{lease.TaskFilter{Agent: "a"}, 3},
		{lease.TaskFilter{State: lease.TaskRunning}, 2},
		{lease.TaskFilter{Lane: "list-1", Agent: "a", State: lease.TaskQueued}, 1},
		{lease.TaskFilter{Limit: 2}, 2},
	} {
		if got := mustTasks(t, p, c.f); len(got) != c.want {
			t.Errorf("tasks %+v: got %d, want %d", c.f, len(got), c.want)
		}
	}

	runs := mustRuns(t, p, lease.RunFilter{TaskID: id})
	if len(runs) != 3 {
		t.Fatalf("runs of task %d: got %d, want 3", id, len(runs))
	}
	for i, r := range runs {
		if r.Attempt != i+1 || r.TaskID != id {
			t.Errorf("runs of task %d in attempt order: run %d is attempt %d of task %d", id, i, r.Attempt, r.TaskID)
		}
	}
	all := mustRuns(t, p, lease.RunFilter{})
	if len(all) != 4 {
		t.Fatalf("all runs: got %d, want 4", len(all))
	}
	for i := 1; i < len(all); i++ {
		if all[i].StartedAt.After(all[i-1].StartedAt) {
			t.Errorf("runs are not newest first: %d started %v after %d started %v", all[i].ID, all[i].StartedAt, all[i-1].ID, all[i-1].StartedAt)
		}
	}
	for _, c := range []struct {
		f    lease.RunFilter
		want int
	}{
		{lease.RunFilter{Lane: "list-2"}, 1},
		{lease.RunFilter{Owner: "someone-else"}, 1},
		{lease.RunFilter{State: lease.RunFailed}, 2},
		{lease.RunFilter{State: lease.RunRunning, Lane: "list-1"}, 1},
		{lease.RunFilter{Limit: 3}, 3},
		{lease.RunFilter{Agent: "a"}, 4},
		{lease.RunFilter{Agent: "b"}, 0},
		{lease.RunFilter{AfterID: all[1].ID}, 1},
		{lease.RunFilter{StartedAfter: all[1].StartedAt}, 1},
		{lease.RunFilter{StartedAfter: time.Now().Add(time.Hour)}, 0},
	} {
		if got := mustRuns(t, p, c.f); len(got) != c.want {
			t.Errorf("runs %+v: got %d, want %d", c.f, len(got), c.want)
		}
	}
	checkLane(t, p, "list-1", lease.Lane{Name: "list-1", MaxRunning: 5, Running: 1, Queued: 2})
	if _, err := p.Task(ctx, 1<<40); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("unknown task: got %v, want ErrNotFound", err)
	}
	if _, err := p.Run(ctx, 1<<40); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("unknown run: got %v, want ErrNotFound", err)
	}
	if err := p.Ping(ctx); err != nil {
		t.Errorf("ping: %v", err)
	}
}
