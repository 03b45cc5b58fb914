package leasetest

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func claimShort(lanes ...string) lease.ClaimParams {
	cp := claimIn(lanes...)
	cp.Owner, cp.Lease = "short", shortLease
	return cp
}

// Ensure the next claim covering a lane abandons its expired run, writes the
// silence into the summary, and frees the task (or fails it when out of
// attempts) and the lane.
func testReapExpiredLease(t *testing.T, p lease.Provider) {
	ep := task("reap", "a")
	ep.MaxAttempts = 2
	a := mustEnqueue(t, p, ep)
	b := mustEnqueue(t, p, ep)
	first := MustClaim(t, p, claimShort("reap"))
	last := task("reap-last", "a")
	last.MaxAttempts = 1
	c := mustEnqueue(t, p, last)
	lastRun := MustClaim(t, p, claimShort("reap-last"))
	time.Sleep(pastShort)

	next := MustClaim(t, p, claimIn("reap"))
	r := MustRun(t, p, first.RunID)
	if r.State != lease.RunAbandoned || !isSilence(r.Summary) || r.FinishedAt.IsZero() {
		t.Fatalf("expired run after a claim: state %s, summary %q, finished %v; want abandoned with %q",
			r.State, r.Summary, r.FinishedAt, lease.SilenceSummary(pastShort))
	}
	mustNoWork(t, p, claimIn("reap")) // limit 1, held by next
	mustSettle(t, p, complete(next.RunID))
	other := MustClaim(t, p, claimIn("reap"))
	if got := []int64{next.TaskID, other.TaskID}; !(got[0] == a && got[1] == b || got[0] == b && got[1] == a) {
		t.Fatalf("claims after the reap took tasks %v, want %d and %d", got, a, b)
	}
	mustSettle(t, p, complete(other.RunID))
	if tk := wantState(t, p, a, lease.TaskDone); tk.Attempts != 2 {
		t.Errorf("reaped task %d: %d attempts, want 2", a, tk.Attempts)
	}

	mustNoWork(t, p, claimIn("reap-last"))
	if r := MustRun(t, p, lastRun.RunID); r.State != lease.RunAbandoned || !isSilence(r.Summary) {
		t.Errorf("expired run of a task out of attempts: state %s, summary %q; want abandoned with the silence", r.State, r.Summary)
	}
	if tk := wantState(t, p, c, lease.TaskFailed); tk.FinishedAt.IsZero() {
		t.Errorf("task %d failed without a finish time", c)
	}
	checkConsistent(t, p)
}

// snapshot is what a stale write must not change.
type snapshot struct {
	task lease.Task
	runs []lease.Run
}

func takeSnapshot(t *testing.T, p lease.Provider, taskID int64) snapshot {
	t.Helper()
	return snapshot{MustTask(t, p, taskID), mustRuns(t, p, lease.RunFilter{TaskID: taskID})}
}

func (s snapshot) check(t *testing.T, after snapshot, what string) {
	t.Helper()
	x, y := s.task, after.task
	if x.State != y.State || x.Attempts != y.Attempts || x.CancelRequested != y.CancelRequested ||
		!x.RunAfter.Equal(y.RunAfter) || !x.FinishedAt.Equal(y.FinishedAt) {
		t.Errorf("%s changed task %d:\nbefore %+v\nafter  %+v", what, x.ID, x, y)
	}
	if len(s.runs) != len(after.runs) {
		t.Fatalf("%s changed the runs of task %d from %d to %d", what, x.ID, len(s.runs), len(after.runs))
	}
	for i, r := range s.runs {
		u := after.runs[i]
		if r.ID != u.ID || r.State != u.State || r.Summary != u.Summary || !r.FinishedAt.Equal(u.FinishedAt) ||
			!r.LeaseExpiresAt.Equal(u.LeaseExpiresAt) || !r.LastHeartbeatAt.Equal(u.LastHeartbeatAt) || r.OutputTail != u.OutputTail {
			t.Errorf("%s changed run %d:\nbefore %+v\nafter  %+v", what, r.ID, r, u)
		}
	}
}

// staleWrites sends a heartbeat and a settlement with each outcome from a
// run that is no longer live. Each must be refused with ErrLeaseLost, except
// the outcome the run already has (same), which may also succeed.
func staleWrites(t *testing.T, p lease.Provider, runID int64, same lease.RunState, outcomes ...lease.RunState) {
	t.Helper()
	if res := beat(t, p, lease.Beat{RunID: runID, Lease: longLease, PID: 4242}); !errors.Is(res.Err, lease.ErrLeaseLost) {
		t.Errorf("stale heartbeat of run %d: got %v, want ErrLeaseLost", runID, res.Err)
	}
	code := 0
	if len(outcomes) == 0 {
		outcomes = []lease.RunState{lease.RunCompleted, lease.RunFailed, lease.RunAbandoned, lease.RunCancelled}
	}
	for _, out := range outcomes {
		err := settle(t, p, lease.Settlement{RunID: runID, Outcome: out, Summary: "stale " + string(out), ExitCode: &code, OutputTail: "stale"})
		if out == same && err == nil {
			continue
		}
		if !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("stale settlement of run %d as %s: got %v, want ErrLeaseLost", runID, out, err)
		}
	}
}

// Ensure heartbeats and settlements from a run whose lease expired, was
// reaped or was settled are refused with ErrLeaseLost and change nothing
// (but a completion of an expired run no other run followed, which
// Settle/LateCompletion covers), and that a late completion after a reap
// and a new claim leaves the new run alone.
func testFencingStaleRun(t *testing.T, p lease.Provider) {
	mustEnqueue(t, p, task("fence-expired", "a"))
	expired := MustClaim(t, p, claimShort("fence-expired"))
	ep := task("fence-reaped", "a")
	ep.MaxAttempts = 3
	mustEnqueue(t, p, ep)
	old := MustClaim(t, p, claimShort("fence-reaped"))
	time.Sleep(pastShort)
	t.Run("Expired", func(t *testing.T) {
		before := takeSnapshot(t, p, expired.TaskID)
		staleWrites(t, p, expired.RunID, "", lease.RunFailed, lease.RunAbandoned, lease.RunCancelled)
		before.check(t, takeSnapshot(t, p, expired.TaskID), "a write from an expired run")
	})
	t.Run("Reaped", func(t *testing.T) {
		current := MustClaim(t, p, claimIn("fence-reaped"))
		if current.TaskID != old.TaskID || current.Attempt != 2 {
			t.Fatalf("claim after expiry: got task %d attempt %d, want task %d attempt 2", current.TaskID, current.Attempt, old.TaskID)
		}
		before := takeSnapshot(t, p, old.TaskID)
		staleWrites(t, p, old.RunID, lease.RunAbandoned)
		before.check(t, takeSnapshot(t, p, old.TaskID), "a write from a reaped run")
		if res := beat(t, p, lease.Beat{RunID: current.RunID, Lease: longLease}); res.Err != nil {
			t.Fatalf("heartbeat of the new run: %v", res.Err)
		}
		mustSettle(t, p, lease.Settlement{RunID: current.RunID, Outcome: lease.RunCompleted, Summary: "new"})
		if r := MustRun(t, p, current.RunID); r.Summary != "new" || r.State != lease.RunCompleted {
			t.Errorf("new run: state %s summary %q, want completed %q", r.State, r.Summary, "new")
		}
	})
	t.Run("Settled", func(t *testing.T) {
		mustEnqueue(t, p, task("fence-settled", "a"))
		l := MustClaim(t, p, claimIn("fence-settled"))
		mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "first"})
		before := takeSnapshot(t, p, l.TaskID)
		staleWrites(t, p, l.RunID, lease.RunCompleted)
		before.check(t, takeSnapshot(t, p, l.TaskID), "a write from a settled run")
		if r := MustRun(t, p, l.RunID); r.Summary != "first" {
			t.Errorf("settled run summary %q, want %q", r.Summary, "first")
		}
	})
	checkConsistent(t, p)
}

// Ensure a heartbeat keeps a run live past its first lease and records what
// it carries.
func testHeartbeatExtendsLease(t *testing.T, p lease.Provider) {
	mustEnqueue(t, p, task("beat", "a"))
	mustEnqueue(t, p, task("beat", "a"))
	l := MustClaim(t, p, claimShort("beat"))
	start := MustRun(t, p, l.RunID)
	time.Sleep(shortLease / 2)
	out := start.StartedAt.Add(time.Second).Truncate(time.Millisecond)
	res := beat(t, p, lease.Beat{RunID: l.RunID, Lease: 2 * shortLease, PID: 4321, LastOutputAt: out})
	if res.Err != nil || !res.LeaseExpiresAt.After(l.LeaseExpiresAt) || res.CancelRequested {
		t.Fatalf("heartbeat: got %+v, want a later lease than %v", res, l.LeaseExpiresAt)
	}
	time.Sleep(shortLease * 7 / 10) // past the first lease, within the second
	mustNoWork(t, p, claimIn("beat"))
	r := MustRun(t, p, l.RunID)
	if r.State != lease.RunRunning || r.PID != 4321 || !near(r.LastOutputAt, out, time.Millisecond) {
		t.Fatalf("run after a heartbeat: state %s pid %d last output %v; want running 4321 %v", r.State, r.PID, r.LastOutputAt, out)
	}
	if !r.LastHeartbeatAt.After(start.LastHeartbeatAt) || !near(r.LeaseExpiresAt, res.LeaseExpiresAt, time.Millisecond) {
		t.Errorf("run after a heartbeat: last heartbeat %v (was %v), lease %v (heartbeat said %v)",
			r.LastHeartbeatAt, start.LastHeartbeatAt, r.LeaseExpiresAt, res.LeaseExpiresAt)
	}
	res = beat(t, p, lease.Beat{RunID: l.RunID})
	r = MustRun(t, p, l.RunID)
	if res.Err != nil || !near(r.LeaseExpiresAt, r.LastHeartbeatAt.Add(lease.DefaultLease), time.Second) {
		t.Errorf("heartbeat with no lease: got %+v, run lease %v, last heartbeat %v; want the default lease", res, r.LeaseExpiresAt, r.LastHeartbeatAt)
	}
	neg, err := p.Heartbeat(context.Background(), lease.Beat{RunID: l.RunID, Lease: -time.Second})
	if err == nil && len(neg) == 1 {
		err = neg[0].Err
	}
	if !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("heartbeat with a negative lease: got %v, want ErrInvalid", err)
	}
}

// Ensure one heartbeat call answers each run on its own.
func testHeartbeatBatch(t *testing.T, p lease.Provider) {
	mustSetLane(t, p, "batch", 3)
	for range 3 {
		mustEnqueue(t, p, task("batch", "a"))
	}
	ls := make([]*lease.Lease, 3)
	for i := range ls {
		ls[i] = MustClaim(t, p, claimIn("batch"))
	}
	mustSettle(t, p, complete(ls[1].RunID))
	if _, err := p.Cancel(context.Background(), ls[2].TaskID); err != nil {
		t.Fatalf("cancel task %d: %v", ls[2].TaskID, err)
	}
	const unknown = 1 << 40
	beats := []lease.Beat{{RunID: ls[0].RunID, Lease: longLease}, {RunID: ls[1].RunID, Lease: longLease},
		{RunID: ls[2].RunID, Lease: longLease}, {RunID: unknown, Lease: longLease}}
	res, err := p.Heartbeat(context.Background(), beats...)
	if err != nil || len(res) != len(beats) {
		t.Fatalf("heartbeat of %d runs: got %d results, error %v", len(beats), len(res), err)
	}
	for i, r := range res {
		if r.RunID != beats[i].RunID {
			t.Errorf("result %d is for run %d, want %d", i, r.RunID, beats[i].RunID)
		}
	}
	if res[0].Err != nil || res[0].CancelRequested || res[0].LeaseExpiresAt.IsZero() {
		t.Errorf("live run: got %+v, want a new lease", res[0])
	}
	if !errors.Is(res[1].Err, lease.ErrLeaseLost) {
		t.Errorf("settled run: got %v, want ErrLeaseLost", res[1].Err)
	}
	if res[2].Err != nil || !res[2].CancelRequested {
		t.Errorf("run of a cancelled task: got %+v, want a new lease and CancelRequested", res[2])
	}
	if !errors.Is(res[3].Err, lease.ErrLeaseLost) && !errors.Is(res[3].Err, lease.ErrNotFound) {
		t.Errorf("unknown run: got %v, want ErrLeaseLost or ErrNotFound", res[3].Err)
	}
}

// Ensure claimers racing over lanes whose runs have all expired reap each
// run once and refill each lane exactly to its limit.
func testReapUnderRace(t *testing.T, p lease.Provider) {
	limits := map[string]int{"rr-a": 1, "rr-b": 1, "rr-c": 2}
	var expired []*lease.Lease
	for lane, limit := range limits {
		mustSetLane(t, p, lane, limit)
		for range limit {
			mustEnqueue(t, p, task(lane, "a"))
			expired = append(expired, MustClaim(t, p, claimShort(lane)))
			mustEnqueue(t, p, task(lane, "a"))
		}
	}
	time.Sleep(pastShort)
	var claimed atomic.Int64
	lanes := newLaneTracker(limits)
	f := &failures{t: t}
	race(16, func(g int) {
		for range 3 {
			cp := claimIn()
			if g%2 == 0 {
				cp = claimIn("rr-a", "rr-b", "rr-c")
			}
			l, err := p.Claim(context.Background(), cp)
			if errors.Is(err, lease.ErrNoWork) {
				continue
			}
			if err != nil {
				f.errorf("claim: %v", err)
				continue
			}
			claimed.Add(1)
			if err := lanes.enter(l.Lane); err != nil {
				f.errorf("%v", err)
			}
		}
	})
	if got := claimed.Load(); got != 4 {
		t.Errorf("racing claims over lanes with 4 expired runs and room for 4: %d claimed, want 4", got)
	}
	for _, l := range expired {
		if r := MustRun(t, p, l.RunID); r.State != lease.RunAbandoned || !isSilence(r.Summary) {
			t.Errorf("expired run %d: state %s summary %q, want abandoned with the silence", l.RunID, r.State, r.Summary)
		}
	}
	for lane, limit := range limits {
		checkLane(t, p, lane, lease.Lane{Name: lane, MaxRunning: limit, Running: limit, Queued: limit})
	}
	checkConsistent(t, p)
}

// Ensure a completion that comes after its run's lease ran out is taken
// while no other run of the task was claimed: the run still marked running,
// reaped with its task queued again, or reaped on its last attempt with its
// task failed for good. The run ends completed with what the settlement
// carries, its task is done and is not claimed again, and the settlement
// sent again answers as a retry does. A late failure is still refused.
func testSettleLateCompletion(t *testing.T, p lease.Provider) {
	queued := task("late-queued", "a")
	queued.MaxAttempts = 3
	mustEnqueue(t, p, queued)
	last := task("late-last", "a")
	last.MaxAttempts = 1
	mustEnqueue(t, p, last)
	mustEnqueue(t, p, task("late-expired", "a"))
	mustEnqueue(t, p, task("late-failed", "a"))
	expired := MustClaim(t, p, claimShort("late-expired"))
	reaped := MustClaim(t, p, claimShort("late-queued"))
	lastRun := MustClaim(t, p, claimShort("late-last"))
	failed := MustClaim(t, p, claimShort("late-failed"))
	// A claim of another agent's task in the lanes reaps their expired
	// runs; that task ends before the late completions come.
	mustEnqueue(t, p, task("late-queued", "other"))
	mustEnqueue(t, p, task("late-last", "other"))
	time.Sleep(pastShort)
	for range 2 {
		cp := claimIn("late-queued", "late-last")
		cp.Agent = "other"
		mustSettle(t, p, complete(MustClaim(t, p, cp).RunID))
	}
	if r := MustRun(t, p, reaped.RunID); r.State != lease.RunAbandoned {
		t.Fatalf("run %d past its lease after a claim of its lane: %s, want abandoned (reaped)", r.ID, r.State)
	}
	wantState(t, p, reaped.TaskID, lease.TaskQueued)
	wantState(t, p, lastRun.TaskID, lease.TaskFailed)

	code := 0
	for _, c := range []struct {
		name string
		l    *lease.Lease
		lane string
	}{{"Expired", expired, "late-expired"}, {"Reaped", reaped, "late-queued"}, {"ReapedLastAttempt", lastRun, "late-last"}} {
		t.Run(c.name, func(t *testing.T) {
			s := lease.Settlement{RunID: c.l.RunID, ClaimToken: c.l.ClaimToken, Outcome: lease.RunCompleted,
				Summary: "finished during an outage", ExitCode: &code, OutputTail: "late tail"}
			mustSettle(t, p, s)
			r := MustRun(t, p, c.l.RunID)
			if r.State != lease.RunCompleted || r.Summary != s.Summary || r.OutputTail != s.OutputTail || r.FinishedAt.IsZero() {
				t.Errorf("run %d after its late completion: state %s summary %q tail %q finished %v; want completed with the settlement's summary and tail",
					r.ID, r.State, r.Summary, r.OutputTail, r.FinishedAt)
			}
			tk := MustTask(t, p, c.l.TaskID)
			if tk.State != lease.TaskDone || tk.FinishedAt.IsZero() {
				t.Errorf("task %d after its run's late completion: state %s finished %v; want done", tk.ID, tk.State, tk.FinishedAt)
			}
			mustNoWork(t, p, claimIn(c.lane))
			if runs := mustRuns(t, p, lease.RunFilter{TaskID: c.l.TaskID}); len(runs) != 1 {
				t.Errorf("task %d has %d runs, want its one run", c.l.TaskID, len(runs))
			}
			before := takeSnapshot(t, p, c.l.TaskID)
			mustSettle(t, p, s) // the reply was lost: sent again
			before.check(t, takeSnapshot(t, p, c.l.TaskID), "a late completion sent again")
		})
	}
	t.Run("FailureRefused", func(t *testing.T) {
		before := takeSnapshot(t, p, failed.TaskID)
		err := settle(t, p, lease.Settlement{RunID: failed.RunID, Outcome: lease.RunFailed, Summary: "late failure", ExitCode: &code})
		if !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("late failure of run %d: got %v, want ErrLeaseLost", failed.RunID, err)
		}
		before.check(t, takeSnapshot(t, p, failed.TaskID), "a late failure")
	})
	t.Run("AfterAbandonRefused", func(t *testing.T) {
		// A run its owner gave up while it held the lease is no late
		// completion: the abandon stands.
		mustEnqueue(t, p, task("late-abandoned", "a"))
		l := MustClaim(t, p, claimIn("late-abandoned"))
		mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "giving up"})
		before := takeSnapshot(t, p, l.TaskID)
		err := settle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "done after all", ExitCode: &code})
		if !errors.Is(err, lease.ErrLeaseLost) {
			t.Errorf("completion of run %d after its owner abandoned it: got %v, want ErrLeaseLost", l.RunID, err)
		}
		before.check(t, takeSnapshot(t, p, l.TaskID), "a completion after an abandon")
	})
	checkConsistent(t, p)
}
