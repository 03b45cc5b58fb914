package leasetest

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure settlements record how runs ended, and that settling again with
// the same outcome succeeds and changes nothing.
func testSettleIdempotent(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustSetLane(t, p, "idem", 3)
	for range 3 {
		mustEnqueue(t, p, task("idem", "a"))
	}
	a, b, c := MustClaim(t, p, claimIn("idem")), MustClaim(t, p, claimIn("idem")), MustClaim(t, p, claimIn("idem"))
	zero, three := 0, 3
	first := []lease.Settlement{
		{RunID: a.RunID, Outcome: lease.RunCompleted, Summary: "done", ExitCode: &zero, OutputTail: "tail a"},
		{RunID: b.RunID, Outcome: lease.RunFailed, Summary: "boom", ExitCode: &three, OutputTail: "tail b", RetryIn: time.Hour},
		{RunID: c.RunID, Outcome: lease.RunAbandoned, Summary: "killed", Signal: "SIGKILL"},
	}
	for i := range 2 {
		errs, err := p.Settle(ctx, first...)
		if err != nil || len(errs) != 3 || errs[0] != nil || errs[1] != nil || errs[2] != nil {
			t.Fatalf("settlement %d of three runs: got %v, %v; want three nils", i+1, errs, err)
		}
		if i == 0 {
			checkSettled(t, p, a, b, c)
		}
	}
	checkSettled(t, p, a, b, c)

	for _, s := range []lease.Settlement{
		{RunID: a.RunID, Outcome: lease.RunRunning},
		{RunID: a.RunID, Outcome: "exploded"},
		{RunID: a.RunID, Outcome: lease.RunFailed, RetryIn: -time.Second},
	} {
		errs, err := p.Settle(ctx, s)
		if err == nil && len(errs) == 1 {
			err = errs[0]
		}
		if !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("settle with outcome %q, retry %s: got %v, want ErrInvalid", s.Outcome, s.RetryIn, err)
		}
	}
	checkSettled(t, p, a, b, c)
}

func checkSettled(t *testing.T, p lease.Provider, a, b, c *lease.Lease) {
	t.Helper()
	ra, rb, rc := MustRun(t, p, a.RunID), MustRun(t, p, b.RunID), MustRun(t, p, c.RunID)
	if ra.State != lease.RunCompleted || ra.Summary != "done" || ra.ExitCode == nil || *ra.ExitCode != 0 ||
		ra.OutputTail != "tail a" || ra.FinishedAt.IsZero() {
		t.Errorf("completed run: got %+v", ra)
	}
	if rb.State != lease.RunFailed || rb.Summary != "boom" || rb.ExitCode == nil || *rb.ExitCode != 3 || rb.OutputTail != "tail b" {
		t.Errorf("failed run: got %+v", rb)
	}
	if rc.State != lease.RunAbandoned || rc.Summary != "killed" || rc.Signal != "SIGKILL" || rc.ExitCode != nil {
		t.Errorf("abandoned run: got %+v", rc)
	}
	if tk := wantState(t, p, a.TaskID, lease.TaskDone); tk.FinishedAt.IsZero() || tk.Attempts != 1 {
		t.Errorf("completed task: got %+v", tk)
	}
	tb := wantState(t, p, b.TaskID, lease.TaskQueued)
	if tb.Attempts != 1 || !near(tb.RunAfter, rb.FinishedAt.Add(time.Hour), time.Second) {
		t.Errorf("failed task: attempts %d, run after %v; want 1 and an hour after %v", tb.Attempts, tb.RunAfter, rb.FinishedAt)
	}
	if tc := wantState(t, p, c.TaskID, lease.TaskQueued); tc.Attempts != 1 || tc.RunAfter.After(rc.FinishedAt.Add(time.Second)) {
		t.Errorf("abandoned task: attempts %d, run after %v; want 1 and claimable at once", tc.Attempts, tc.RunAfter)
	}
}

// Ensure a failed attempt is retried after its delay (the default backoff
// when none is given) and the task fails when its attempts are used up.
func testSettleFailRetriesThenFails(t *testing.T, p lease.Provider) {
	ep := task("fail-backoff", "a")
	id := mustEnqueue(t, p, ep)
	l := MustClaim(t, p, claimIn("fail-backoff"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "exit 1"})
	tk, r := wantState(t, p, id, lease.TaskQueued), MustRun(t, p, l.RunID)
	lo, hi := lease.DefaultBackoffBase*8/10, lease.DefaultBackoffBase*12/10
	if d := tk.RunAfter.Sub(r.FinishedAt); d < lo-100*time.Millisecond || d > hi+100*time.Millisecond {
		t.Errorf("default backoff after attempt 1: %s, want between %s and %s", d, lo, hi)
	}
	mustNoWork(t, p, claimIn("fail-backoff"))

	ep = task("fail", "a")
	ep.MaxAttempts = 3
	id = mustEnqueue(t, p, ep)
	for attempt := 1; attempt <= 3; attempt++ {
		l := MustClaim(t, p, claimIn("fail"))
		if l.TaskID != id || l.Attempt != attempt {
			t.Fatalf("claim: task %d attempt %d, want task %d attempt %d", l.TaskID, l.Attempt, id, attempt)
		}
		mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "exit 1", RetryIn: 300 * time.Millisecond})
		if attempt == 3 {
			break
		}
		tk, r := wantState(t, p, id, lease.TaskQueued), MustRun(t, p, l.RunID)
		if !near(tk.RunAfter, r.FinishedAt.Add(300*time.Millisecond), 50*time.Millisecond) {
			t.Errorf("attempt %d: retry at %v, want 300ms after %v", attempt, tk.RunAfter, r.FinishedAt)
		}
		time.Sleep(400 * time.Millisecond)
	}
	if tk := wantState(t, p, id, lease.TaskFailed); tk.Attempts != 3 || tk.FinishedAt.IsZero() {
		t.Errorf("failed task: attempts %d, finished %v; want 3 and a finish time", tk.Attempts, tk.FinishedAt)
	} else if tk.RunAfter.After(tk.FinishedAt) {
		t.Errorf("failed task: runs after %v, later than its end %v: it runs no more", tk.RunAfter, tk.FinishedAt)
	}
	mustNoWork(t, p, claimIn("fail"))
	runs := mustRuns(t, p, lease.RunFilter{TaskID: id})
	if len(runs) != 3 {
		t.Fatalf("runs of the failed task: %d, want 3", len(runs))
	}
	for i, r := range runs {
		if r.Attempt != i+1 || r.State != lease.RunFailed {
			t.Errorf("run %d: attempt %d state %s, want attempt %d failed", i, r.Attempt, r.State, i+1)
		}
	}
}

// Ensure an abandoned run makes its task claimable at once, that a refund
// gives its attempt back, and that without one the last attempt fails it.
func testSettleAbandonRefund(t *testing.T, p lease.Provider) {
	ep := task("refund", "a")
	ep.MaxAttempts = 1
	id := mustEnqueue(t, p, ep)
	l := MustClaim(t, p, claimIn("refund"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "shutdown", Refund: true})
	if tk := wantState(t, p, id, lease.TaskQueued); tk.Attempts != 0 {
		t.Fatalf("refunded task: attempts %d, want 0", tk.Attempts)
	}
	l = MustClaim(t, p, claimIn("refund"))
	if l.TaskID != id || l.Attempt != 1 {
		t.Fatalf("claim after refund: task %d attempt %d, want task %d attempt 1", l.TaskID, l.Attempt, id)
	}
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "killed"})
	wantState(t, p, id, lease.TaskFailed)
	mustNoWork(t, p, claimIn("refund"))

	ep.Lane, ep.MaxAttempts = "abandon", 2
	id = mustEnqueue(t, p, ep)
	l = MustClaim(t, p, claimIn("abandon"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "killed"})
	if tk := wantState(t, p, id, lease.TaskQueued); tk.Attempts != 1 {
		t.Fatalf("abandoned task: attempts %d, want 1", tk.Attempts)
	}
	if l = MustClaim(t, p, claimIn("abandon")); l.Attempt != 2 {
		t.Fatalf("claim after abandon: attempt %d, want 2", l.Attempt)
	}
}

// Ensure an abandoned run settled with a retry delay (a timeout or a stall)
// leaves its task queued but not claimable until the delay has passed, and
// that one without a delay (qd's own reasons) is claimable at once.
func testSettleAbandonBackoff(t *testing.T, p lease.Provider) {
	ep := task("abackoff", "a")
	ep.MaxAttempts = 3
	id := mustEnqueue(t, p, ep)
	l := MustClaim(t, p, claimIn("abackoff"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "timed out", RetryIn: time.Hour})
	if tk := wantState(t, p, id, lease.TaskQueued); tk.RunAfter.Before(time.Now().Add(50*time.Minute)) || tk.Attempts != 1 {
		t.Errorf("task after a timed-out run: run_after %s, attempts %d; want an hour from now and 1", tk.RunAfter, tk.Attempts)
	}
	mustNoWork(t, p, claimIn("abackoff"))

	ep.Lane = "abnow"
	id = mustEnqueue(t, p, ep)
	l = MustClaim(t, p, claimIn("abnow"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "lease lost"})
	if l = MustClaim(t, p, claimIn("abnow")); l.TaskID != id {
		t.Errorf("a run abandoned without a delay: claim took task %d, want %d at once", l.TaskID, id)
	}
}

// Ensure a task and a listing of tasks carry the summary of the task's
// latest run, so that a failed task says why without a look at its runs.
func testSettleLastSummary(t *testing.T, p lease.Provider) {
	ep := task("lastsum", "a")
	ep.MaxAttempts = 2
	id := mustEnqueue(t, p, ep)
	if tk := MustTask(t, p, id); tk.LastSummary != "" {
		t.Errorf("task never run: last summary %q", tk.LastSummary)
	}
	for _, why := range []string{"exited 1: first", "exited 1: upstream returned 503"} {
		time.Sleep(5 * time.Millisecond) // past the first attempt's retry delay
		l := MustClaim(t, p, claimIn("lastsum"))
		mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: why, RetryIn: time.Millisecond})
	}
	tasks, err := p.Tasks(context.Background(), lease.TaskFilter{State: lease.TaskFailed, Lane: "lastsum"})
	if err != nil || len(tasks) != 1 || tasks[0].LastSummary != "exited 1: upstream returned 503" {
		t.Errorf("failed tasks: %+v, %v; want one whose last summary is the second run's", tasks, err)
	}
}

// Ensure a settlement that marks the run's log file incomplete is kept on
// the run, that one that does not leaves it empty, and that a refused
// (stale) settlement marks nothing.
func testSettleLogError(t *testing.T, p lease.Provider) {
	const why = "write run log: no space left on device"
	mustEnqueue(t, p, task("logerr", "a"))
	mustEnqueue(t, p, task("logerr", "a"))
	l := MustClaim(t, p, claimIn("logerr"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "ok", OutputTail: "tail\n", LogError: why})
	if r := MustRun(t, p, l.RunID); r.LogError != why || r.OutputTail != "tail\n" {
		t.Errorf("run settled with a log error: LogError %q tail %q, want %q and the tail", r.LogError, r.OutputTail, why)
	}
	errs, err := p.Settle(context.Background(), lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "late", LogError: "other"})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], lease.ErrLeaseLost) {
		t.Fatalf("stale settlement: %v %v, want ErrLeaseLost", errs, err)
	}
	if r := MustRun(t, p, l.RunID); r.LogError != why {
		t.Errorf("a refused settlement changed LogError to %q", r.LogError)
	}
	l = MustClaim(t, p, claimIn("logerr"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "ok"})
	if r := MustRun(t, p, l.RunID); r.LogError != "" {
		t.Errorf("run settled whole: LogError %q, want empty", r.LogError)
	}
}

// Ensure what a run's cgroup measured (CPU time to the microsecond, memory
// peak in bytes) is kept on the run and read back, in Run and Runs; that a
// settlement without them leaves them absent, not zero; and that a refused
// (stale) settlement changes neither.
func testSettleUsage(t *testing.T, p lease.Provider) {
	mustEnqueue(t, p, task("usage", "a"))
	mustEnqueue(t, p, task("usage", "a"))
	l := MustClaim(t, p, claimIn("usage"))
	cpu, peak := 1500*time.Millisecond+7*time.Microsecond, int64(123_456_789)
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "exited 1", CPUTime: &cpu, MemoryPeak: &peak})
	check := func(r lease.Run, what string) {
		t.Helper()
		if r.CPUTime == nil || *r.CPUTime != cpu || r.MemoryPeak == nil || *r.MemoryPeak != peak {
			t.Errorf("%s: CPU time %v, memory peak %v; want %s and %d", what, r.CPUTime, r.MemoryPeak, cpu, peak)
		}
	}
	check(MustRun(t, p, l.RunID), "Run")
	runs, err := p.Runs(context.Background(), lease.RunFilter{Lane: "usage"})
	if err != nil || len(runs) != 1 {
		t.Fatalf("Runs: %d runs, %v", len(runs), err)
	}
	check(runs[0], "Runs")
	other := time.Second
	errs, err := p.Settle(context.Background(), lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "late", CPUTime: &other})
	if err != nil || len(errs) != 1 || !errors.Is(errs[0], lease.ErrLeaseLost) {
		t.Fatalf("stale settlement: %v %v, want ErrLeaseLost", errs, err)
	}
	check(MustRun(t, p, l.RunID), "after a refused settlement")
	l = MustClaim(t, p, claimIn("usage"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "ok"})
	if r := MustRun(t, p, l.RunID); r.CPUTime != nil || r.MemoryPeak != nil {
		t.Errorf("run settled unmeasured: CPU time %v, memory peak %v; want both absent", r.CPUTime, r.MemoryPeak)
	}
}

// Ensure CancelRequested names exactly the live runs asked about whose task
// has a cancel request: not another live run, not an unknown id, and not a
// run that has ended.
func testCancelRequested(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustEnqueue(t, p, task("creq1", "a"))
	mustEnqueue(t, p, task("creq2", "a"))
	mustEnqueue(t, p, task("creq3", "a"))
	a, b, c := MustClaim(t, p, claimIn("creq1")), MustClaim(t, p, claimIn("creq2")), MustClaim(t, p, claimIn("creq3"))
	for _, id := range []int64{a.TaskID, c.TaskID} {
		if _, err := p.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	mustSettle(t, p, lease.Settlement{RunID: c.RunID, Outcome: lease.RunCancelled, Summary: "cancelled"})
	got, err := p.CancelRequested(ctx, []int64{a.RunID, b.RunID, c.RunID, 1 << 40})
	if err != nil || len(got) != 1 || got[0] != a.RunID {
		t.Errorf("cancel requests among runs %d, %d, %d: got %v, %v; want [%d]", a.RunID, b.RunID, c.RunID, got, err, a.RunID)
	}
	if got, err := p.CancelRequested(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("cancel requests of no runs: %v, %v", got, err)
	}
}

// Ensure cancelling a queued task ends it at once, and that only done and
// failed tasks refuse a cancel.
func testCancelQueued(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	id := mustEnqueue(t, p, task("cancel", "a"))
	for i := range 2 {
		if st, err := p.Cancel(ctx, id); err != nil || st != lease.TaskCancelled {
			t.Fatalf("cancel %d of a queued task: got %s, %v; want cancelled", i+1, st, err)
		}
	}
	if tk := wantState(t, p, id, lease.TaskCancelled); tk.FinishedAt.IsZero() || tk.Attempts != 0 {
		t.Errorf("cancelled task: finished %v attempts %d", tk.FinishedAt, tk.Attempts)
	}
	mustNoWork(t, p, claimIn("cancel"))

	done := mustEnqueue(t, p, task("cancel", "a"))
	mustSettle(t, p, complete(MustClaim(t, p, claimIn("cancel")).RunID))
	ep := task("cancel", "a")
	ep.MaxAttempts = 1
	failed := mustEnqueue(t, p, ep)
	l := MustClaim(t, p, claimIn("cancel"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed})
	for id, want := range map[int64]lease.TaskState{done: lease.TaskDone, failed: lease.TaskFailed} {
		if _, err := p.Cancel(ctx, id); !errors.Is(err, lease.ErrConflict) {
			t.Errorf("cancel a %s task: got %v, want ErrConflict", want, err)
		}
		wantState(t, p, id, want)
	}
	if _, err := p.Cancel(ctx, 1<<40); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("cancel an unknown task: got %v, want ErrNotFound", err)
	}
}

// Ensure cancelling a running task marks it, its heartbeat reports it, and
// it ends cancelled whether its holder settles it so or its lease expires.
func testCancelRunning(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustSetLane(t, p, "cancel-run", 2)
	a := mustEnqueue(t, p, task("cancel-run", "a"))
	la := MustClaim(t, p, claimIn("cancel-run"))
	b := mustEnqueue(t, p, task("cancel-run", "a"))
	lb := MustClaim(t, p, claimShort("cancel-run"))
	for _, id := range []int64{a, b} {
		if st, err := p.Cancel(ctx, id); err != nil || st != lease.TaskRunning {
			t.Fatalf("cancel running task %d: got %s, %v; want running", id, st, err)
		}
	}
	if tk := wantState(t, p, a, lease.TaskRunning); !tk.CancelRequested {
		t.Errorf("task %d: cancel not requested after a cancel", a)
	}
	if r := MustRun(t, p, la.RunID); !r.CancelRequested || r.State != lease.RunRunning {
		t.Errorf("run %d of a cancelled task: cancel requested %v, state %s", la.RunID, r.CancelRequested, r.State)
	}
	if res := beat(t, p, lease.Beat{RunID: la.RunID, Lease: longLease}); res.Err != nil || !res.CancelRequested {
		t.Errorf("heartbeat of a cancelled task: got %+v, want CancelRequested", res)
	}
	mustSettle(t, p, lease.Settlement{RunID: la.RunID, Outcome: lease.RunCancelled, Summary: "stopped"})
	if tk := wantState(t, p, a, lease.TaskCancelled); tk.FinishedAt.IsZero() {
		t.Errorf("task %d cancelled without a finish time", a)
	}
	if r := MustRun(t, p, la.RunID); r.State != lease.RunCancelled || r.Summary != "stopped" {
		t.Errorf("run %d: state %s summary %q, want cancelled %q", la.RunID, r.State, r.Summary, "stopped")
	}

	time.Sleep(pastShort)
	mustNoWork(t, p, claimIn("cancel-run"))
	if r := MustRun(t, p, lb.RunID); r.State != lease.RunAbandoned || !isSilence(r.Summary) {
		t.Errorf("expired run of a cancelled task: state %s summary %q, want abandoned with the silence", r.State, r.Summary)
	}
	wantState(t, p, b, lease.TaskCancelled)
	checkConsistent(t, p)
}

// Ensure retry queues failed and cancelled tasks with fresh attempts and
// refuses every other state.
func testRetry(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	ep := task("retry", "a")
	ep.MaxAttempts = 1
	failed := mustEnqueue(t, p, ep)
	mustSettle(t, p, lease.Settlement{RunID: MustClaim(t, p, claimIn("retry")).RunID, Outcome: lease.RunFailed})
	cancelled := mustEnqueue(t, p, ep)
	l := MustClaim(t, p, claimIn("retry"))
	if _, err := p.Cancel(ctx, cancelled); err != nil {
		t.Fatalf("cancel task %d: %v", cancelled, err)
	}
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCancelled})

	for _, id := range []int64{failed, cancelled} {
		if err := p.Retry(ctx, id); err != nil {
			t.Fatalf("retry task %d: %v", id, err)
		}
		tk := wantState(t, p, id, lease.TaskQueued)
		if tk.Attempts != 0 || tk.CancelRequested || !tk.FinishedAt.IsZero() {
			t.Errorf("retried task %d: attempts %d, cancel requested %v, finished %v; want a fresh task",
				id, tk.Attempts, tk.CancelRequested, tk.FinishedAt)
		}
		l := MustClaim(t, p, claimIn("retry"))
		if l.TaskID != id || l.Attempt != 1 {
			t.Fatalf("claim after retry: task %d attempt %d, want task %d attempt 1", l.TaskID, l.Attempt, id)
		}
		if res := beat(t, p, lease.Beat{RunID: l.RunID, Lease: longLease}); res.Err != nil || res.CancelRequested {
			t.Errorf("heartbeat after retry: got %+v, want no cancel", res)
		}
		if id == failed {
			mustSettle(t, p, complete(l.RunID))
		}
	}
	queued := mustEnqueue(t, p, task("retry", "a"))
	for id, state := range map[int64]string{queued: "queued", cancelled: "running", failed: "done"} {
		if err := p.Retry(ctx, id); !errors.Is(err, lease.ErrConflict) {
			t.Errorf("retry a %s task: got %v, want ErrConflict", state, err)
		}
	}
	if err := p.Retry(ctx, 1<<40); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("retry an unknown task: got %v, want ErrNotFound", err)
	}
}

// Ensure AbandonOwner abandons the owner's runs held by the instances named
// at once, frees their tasks, and leaves every other run alone: those of
// other owners, and the live runs of another instance with the same owner
// (a second daemon started with the same name).
func testAbandonOwner(t *testing.T, p lease.Provider) {
	mustSetLane(t, p, "owner", 5)
	for range 5 {
		mustEnqueue(t, p, task("owner", "a"))
	}
	claim := func(owner, instance string) *lease.Lease {
		cp := claimIn("owner")
		cp.Owner, cp.Instance = owner, instance
		return MustClaim(t, p, cp)
	}
	old1, old2 := claim("sup", "old"), claim("sup", "old")
	current, other, twin := claim("sup", "new"), claim("other", "old"), claim("sup", "twin")
	got, err := p.AbandonOwner(context.Background(), "sup", []string{"old", "never"}, "previous instance gone")
	if err != nil {
		t.Fatalf("abandon owner: %v", err)
	}
	slices.Sort(got)
	want := []int64{old1.RunID, old2.RunID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("abandon owner: got runs %v, want %v", got, want)
	}
	for _, l := range []*lease.Lease{old1, old2} {
		if r := MustRun(t, p, l.RunID); r.State != lease.RunAbandoned || r.Summary != "previous instance gone" {
			t.Errorf("run %d: state %s summary %q, want abandoned", l.RunID, r.State, r.Summary)
		}
		wantState(t, p, l.TaskID, lease.TaskQueued)
	}
	for _, l := range []*lease.Lease{current, other, twin} {
		if r := MustRun(t, p, l.RunID); r.State != lease.RunRunning {
			t.Errorf("run %d of another instance or owner: state %s, want running", l.RunID, r.State)
		}
	}
	again, err := p.AbandonOwner(context.Background(), "sup", []string{"old"}, "again")
	if err != nil || len(again) != 0 {
		t.Errorf("second abandon owner: got %v, %v; want none", again, err)
	}
	reclaimed := []int64{claim("sup", "new").TaskID, claim("sup", "new").TaskID}
	slices.Sort(reclaimed)
	freed := []int64{old1.TaskID, old2.TaskID}
	slices.Sort(freed)
	if !slices.Equal(reclaimed, freed) {
		t.Errorf("claims after abandon owner took tasks %v, want %v", reclaimed, freed)
	}
	checkConsistent(t, p)
}
