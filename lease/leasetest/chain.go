package leasetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// after is a task of lane and agent "a" that waits for parents.
func after(lane string, parents ...int64) lease.EnqueueParams {
	ep := task(lane, "a")
	ep.After = parents
	return ep
}

// runTo claims task id (alone in its lane) and settles it with outcome.
func runTo(tb testing.TB, p lease.Provider, lane string, id int64, s lease.Settlement) {
	tb.Helper()
	l := MustClaim(tb, p, claimIn(lane))
	if l.TaskID != id {
		tb.Fatalf("claim in lane %s: got task %d, want %d", lane, l.TaskID, id)
	}
	s.RunID = l.RunID
	mustSettle(tb, p, s)
}

// Ensure a waiting task is never claimed: claimers race over every lane
// while the tasks it waits for finish one by one, and no dependent is
// claimed before the last of its parents is done; then every one is.
func testChainWaitingNeverClaimed(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	const chains = 8
	type chainIDs struct{ a, b, d int64 }
	var cs []chainIDs
	for i := range chains {
		lane := fmt.Sprintf("par%d", i)
		a, b := mustEnqueue(t, p, task(lane, "a")), mustEnqueue(t, p, task(lane, "a"))
		cs = append(cs, chainIDs{a, b, mustEnqueue(t, p, after("dep", a, b))})
	}
	mustSetLane(t, p, "dep", chains)
	depOf := map[int64]chainIDs{}
	for _, c := range cs {
		depOf[c.d] = c
	}
	stop := make(chan struct{})
	var mu sync.Mutex
	claimed := map[int64]bool{}
	var wg sync.WaitGroup
	var errs []string
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				ls, err := p.ClaimMany(ctx, claimIn("dep"), 2)
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
				for _, l := range ls {
					c := depOf[l.TaskID]
					for _, parent := range []int64{c.a, c.b} {
						if tk, err := p.Task(ctx, parent); err != nil || tk.State != lease.TaskDone {
							mu.Lock()
							errs = append(errs, fmt.Sprintf("task %d claimed while task %d it waits for is %s (%v)", l.TaskID, parent, tk.State, err))
							mu.Unlock()
						}
					}
					mu.Lock()
					claimed[l.TaskID] = true
					mu.Unlock()
				}
			}
		}()
	}
	for i, c := range cs {
		lane := fmt.Sprintf("par%d", i)
		runTo(t, p, lane, c.a, complete(0))
		time.Sleep(20 * time.Millisecond) // time for a claim to take the dependent too early
		if tk := MustTask(t, p, c.d); tk.State != lease.TaskWaiting {
			t.Errorf("task %d is %s with one of its two parents done, want waiting", c.d, tk.State)
		}
		runTo(t, p, lane, c.b, complete(0))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(claimed)
		mu.Unlock()
		if n == chains || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if len(claimed) != chains {
		t.Errorf("%d of %d dependents claimed once their parents were done", len(claimed), chains)
	}
}

// Ensure a completion's result is the task's, the results of the tasks a
// task waits for are read by id, and a result with another outcome is not
// kept.
func testChainResults(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	a, b := mustEnqueue(t, p, task("res", "a")), mustEnqueue(t, p, task("resb", "a"))
	d := mustEnqueue(t, p, after("resd", a, b))
	l := MustClaim(t, p, claimIn("res"))
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Result: json.RawMessage(`{"n":0}`), RetryIn: time.Millisecond})
	time.Sleep(5 * time.Millisecond)
	runTo(t, p, "res", a, lease.Settlement{Outcome: lease.RunCompleted, Result: json.RawMessage(`{"n": 1}`)})
	runTo(t, p, "resb", b, complete(0))
	if got := string(MustTask(t, p, a).Result); got != `{"n": 1}` {
		t.Errorf("result of task %d: got %q, want the completing run's, byte for byte", a, got)
	}
	if got := MustTask(t, p, b).Result; got != nil {
		t.Errorf("result of task %d, completed with none: got %q, want nil", b, got)
	}
	res, err := p.ParentResults(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || string(res[a]) != `{"n": 1}` || res[b] != nil {
		t.Errorf("results task %d waited for: got %s, want {%d: {\"n\": 1}, %d: nil}", d, fmt.Sprint(res), a, b)
	}
	if _, err := p.ParentResults(ctx, d+1000); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("results of an unknown task: got %v, want ErrNotFound", err)
	}
	wantState(t, p, d, lease.TaskQueued)
	// The claim says which tasks waited for others, so that a start reads
	// parents' results only for those.
	if l := MustClaim(t, p, claimIn("resd")); l.TaskID != d || !l.Waited {
		t.Errorf("claim of task %d, which waited for %d and %d: task %d, waited %v; want it, waited", d, a, b, l.TaskID, l.Waited)
	}
	if l.Waited {
		t.Errorf("claim of task %d, which waited for none, says it waited", l.TaskID)
	}
}

// Ensure a task that fails for good cancels what waits for it, down the
// chain, naming it; a task waiting for any end is queued instead; and a
// retry of the chain brings the cancelled ones back, and the chain
// completes.
func testChainFailureCancels(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	ep := task("fail", "a")
	ep.MaxAttempts = 1
	a := mustEnqueue(t, p, ep)
	d := mustEnqueue(t, p, after("faild", a))
	e := mustEnqueue(t, p, after("faile", d))
	anyEp := after("faila", a)
	anyEp.AfterAny = true
	y := mustEnqueue(t, p, anyEp)
	mustNoWork(t, p, claimIn("faild", "faile", "faila"))
	runTo(t, p, "fail", a, lease.Settlement{Outcome: lease.RunFailed, Summary: "exited 1"})
	for id, why := range map[int64]string{d: lease.WaitReason(a, lease.TaskFailed), e: lease.WaitReason(d, lease.TaskCancelled)} {
		if tk := wantState(t, p, id, lease.TaskCancelled); tk.LastSummary != why || tk.FinishedAt.IsZero() {
			t.Errorf("task %d cancelled by its chain: summary %q, finished %v; want %q and a time", id, tk.LastSummary, tk.FinishedAt, why)
		}
	}
	if !strings.Contains(lease.WaitReason(a, lease.TaskFailed), fmt.Sprint(a)) {
		t.Errorf("reason %q does not name task %d", lease.WaitReason(a, lease.TaskFailed), a)
	}
	wantState(t, p, y, lease.TaskQueued)

	links, err := p.RetryChain(ctx, a)
	if err != nil {
		t.Fatalf("retry the chain of task %d: %v", a, err)
	}
	if len(links) != 3 || links[0].ID != a || links[0].State != lease.TaskQueued ||
		links[1].ID != d || links[1].State != lease.TaskWaiting || links[2].ID != e || links[2].State != lease.TaskWaiting {
		t.Fatalf("retry the chain of task %d: got %+v, want it queued and %d, %d waiting", a, links, d, e)
	}
	runTo(t, p, "fail", a, complete(0))
	runTo(t, p, "faild", d, complete(0))
	runTo(t, p, "faile", e, complete(0))
	if _, err := p.RetryChain(ctx, a); !errors.Is(err, lease.ErrConflict) {
		t.Errorf("retry of a done task's chain: got %v, want ErrConflict", err)
	}
	if _, err := p.RetryChain(ctx, e+1000); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("retry of an unknown task's chain: got %v, want ErrNotFound", err)
	}
}

// Ensure a task enqueued after tasks already done is queued at once, after
// one already failed cancelled at once, and after ids that name no task,
// or too many, refused with nothing enqueued.
func testChainEnqueue(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	a := mustEnqueue(t, p, task("enq", "a"))
	runTo(t, p, "enq", a, complete(0))
	wantState(t, p, mustEnqueue(t, p, after("enqd", a)), lease.TaskQueued)
	c := mustEnqueue(t, p, task("enq", "a"))
	if _, err := p.Cancel(ctx, c); err != nil {
		t.Fatal(err)
	}
	wantState(t, p, mustEnqueue(t, p, after("enqc", c, a)), lease.TaskCancelled)
	q := mustEnqueue(t, p, task("enq", "a"))
	w := wantState(t, p, mustEnqueue(t, p, after("enqw", q, a, q)), lease.TaskWaiting)
	if len(w.After) != 2 || w.After[0] != a || w.After[1] != q {
		t.Errorf("task waiting for %d and %d (named twice): After = %v", a, q, w.After)
	}
	keyed := after("enqk", q)
	keyed.DedupeKey = "chain-key"
	k := mustEnqueue(t, p, keyed)
	if id, existed, err := p.Enqueue(ctx, keyed); err != nil || !existed || id != k {
		t.Errorf("enqueue with the key of waiting task %d: got %d, existed %v, %v; want it", k, id, existed, err)
	}
	before, _ := p.Tasks(ctx, lease.TaskFilter{})
	for name, ids := range map[string][]int64{
		"unknown": {a, q + 1000}, "itself": {k + 1}, "zero": {0}, "too many": make([]int64, lease.MaxAfter+1),
	} {
		if name == "too many" {
			for i := range ids {
				ids[i] = a
			}
		}
		if _, _, err := p.Enqueue(ctx, after("enqx", ids...)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("enqueue after %s tasks: got %v, want ErrInvalid", name, err)
		}
	}
	if got, _ := p.Tasks(ctx, lease.TaskFilter{}); len(got) != len(before) {
		t.Errorf("refused enqueues left %d tasks, want %d", len(got), len(before))
	}
	parents, dependents, err := p.Chain(ctx, q)
	if err != nil || len(parents) != 0 || len(dependents) != 2 || dependents[0].ID != w.ID || dependents[0].State != lease.TaskWaiting ||
		dependents[1].ID != k {
		t.Errorf("chain of task %d: got %+v, %+v, %v; want tasks %d and %d waiting for it", q, parents, dependents, err, w.ID, k)
	}
	parents, _, err = p.Chain(ctx, w.ID)
	if err != nil || len(parents) != 2 || parents[0].State != lease.TaskDone || parents[1].State != lease.TaskQueued {
		t.Errorf("chain of task %d: parents %+v, %v; want %d done, %d queued", w.ID, parents, err, a, q)
	}
}

// Ensure a cancel of a task's chain cancels everything waiting for it,
// whatever it waits for, and a retry of the chain brings them back.
func testChainCancel(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	a := mustEnqueue(t, p, task("can", "a"))
	anyEp := after("cand", a)
	anyEp.AfterAny = true
	d := mustEnqueue(t, p, anyEp)
	e := mustEnqueue(t, p, after("cane", d))
	links, err := p.CancelChain(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(links) != 3 || links[2].ID != a {
		t.Fatalf("cancel the chain of task %d: got %+v, want %d, %d then it", a, links, d, e)
	}
	for _, id := range []int64{a, d, e} {
		wantState(t, p, id, lease.TaskCancelled)
	}
	if tk := MustTask(t, p, d); tk.LastSummary != lease.ChainReason(a) {
		t.Errorf("task %d cancelled with the chain: summary %q, want %q", d, tk.LastSummary, lease.ChainReason(a))
	}
	if _, err := p.RetryChain(ctx, a); err != nil {
		t.Fatal(err)
	}
	wantState(t, p, a, lease.TaskQueued)
	wantState(t, p, d, lease.TaskWaiting)
	wantState(t, p, e, lease.TaskWaiting)
	// A plain cancel of a waiting task wakes what waits for it.
	if st, err := p.Cancel(ctx, d); err != nil || st != lease.TaskCancelled {
		t.Fatalf("cancel waiting task %d: %s, %v", d, st, err)
	}
	wantState(t, p, e, lease.TaskCancelled)
}

// Ensure a task enqueued after one that finishes at that very moment is
// never left waiting: each enqueue races the completion of the task it
// names, and every dependent ends queued.
func testChainEnqueueRacesFinish(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	const n = 20
	mustSetLane(t, p, "race", n)
	for range n {
		mustEnqueue(t, p, task("race", "a"))
	}
	parents, err := p.ClaimMany(ctx, claimIn("race"), n)
	if err != nil || len(parents) != n {
		t.Fatalf("claim %d parents: got %d, %v", n, len(parents), err)
	}
	deps := make([]int64, n)
	var wg sync.WaitGroup
	for i, l := range parents {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if errs, err := p.Settle(ctx, complete(l.RunID)); err != nil || errs[0] != nil {
				t.Errorf("complete parent %d: %v %v", l.TaskID, err, errs)
			}
		}()
		go func() {
			defer wg.Done()
			id, _, err := p.Enqueue(ctx, after("raced", l.TaskID))
			if err != nil {
				t.Errorf("enqueue after %d: %v", l.TaskID, err)
			}
			deps[i] = id
		}()
	}
	wg.Wait()
	for i, id := range deps {
		if tk := MustTask(t, p, id); tk.State != lease.TaskQueued {
			t.Errorf("task %d, enqueued as task %d completed, is %s; want queued", id, parents[i].TaskID, tk.State)
		}
	}
}

// Ensure a completion taken late, after its run was reaped and its task
// failed for good (cancelling what waited for it), brings back what the
// failure cancelled: the task is done, and its dependent queued.
func testChainLateCompletion(t *testing.T, p lease.Provider) {
	ep := task("chlate", "a")
	ep.MaxAttempts = 1
	a := mustEnqueue(t, p, ep)
	d := mustEnqueue(t, p, after("chlated", a))
	l := MustClaim(t, p, claimShort("chlate"))
	mustEnqueue(t, p, task("chlate", "other"))
	time.Sleep(pastShort)
	cp := claimIn("chlate")
	cp.Agent = "other"
	mustSettle(t, p, complete(MustClaim(t, p, cp).RunID)) // reaps a's run: a failed for good
	wantState(t, p, a, lease.TaskFailed)
	wantState(t, p, d, lease.TaskCancelled)
	mustSettle(t, p, lease.Settlement{RunID: l.RunID, ClaimToken: l.ClaimToken, Outcome: lease.RunCompleted, Summary: "late"})
	wantState(t, p, a, lease.TaskDone)
	if tk := wantState(t, p, d, lease.TaskQueued); tk.LastSummary != "" {
		t.Errorf("task %d brought back: summary %q, want none", d, tk.LastSummary)
	}
}

// Ensure a prune keeps a finished task while a task not yet finished
// waits for it (its result is still to be read), and removes it after.
func testChainPrune(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	a := mustEnqueue(t, p, task("prn", "a"))
	b := mustEnqueue(t, p, task("prnb", "a"))
	d := mustEnqueue(t, p, after("prnd", a, b))
	runTo(t, p, "prn", a, lease.Settlement{Outcome: lease.RunCompleted, Result: json.RawMessage(`1`)})
	if _, err := p.Prune(ctx, 0, false); err != nil {
		t.Fatal(err)
	}
	if res, err := p.ParentResults(ctx, d); err != nil || string(res[a]) != "1" {
		t.Fatalf("results task %d waits for after a prune: %v, %v; want task %d's kept", d, res, err, a)
	}
	if _, err := p.Cancel(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Prune(ctx, 0, false); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Task(ctx, a); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("task %d after its dependent ended and a prune: %v, want ErrNotFound", a, err)
	}
}
