package leasetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// raceDeadline bounds every racing test; reaching it is a failure.
const raceDeadline = 20 * time.Second

// pause sleeps for up to max, at random.
func pause(max time.Duration) { time.Sleep(rand.N(max + 1)) }

// race runs fn in n goroutines, released together, and waits for them.
func race(n int, fn func(g int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := range n {
		wg.Go(func() {
			<-start
			fn(g)
		})
	}
	close(start)
	wg.Wait()
}

// laneTracker counts the runs a test holds per lane. A run is live from the
// commit of its claim to the commit of its settlement, so counting from
// after Claim returns to before Settle is called never counts more runs than
// are live: the count must never pass the lane's limit.
type laneTracker struct {
	limit map[string]int
	held  map[string]*atomic.Int64
	peak  map[string]*atomic.Int64
}

func newLaneTracker(limits map[string]int) *laneTracker {
	lt := &laneTracker{limit: limits, held: map[string]*atomic.Int64{}, peak: map[string]*atomic.Int64{}}
	for name := range limits {
		lt.held[name], lt.peak[name] = new(atomic.Int64), new(atomic.Int64)
	}
	return lt
}

// enter counts a claimed run and returns an error when its lane is over.
func (lt *laneTracker) enter(lane string) error {
	held := lt.held[lane]
	if held == nil {
		return fmt.Errorf("claim returned lane %q, which the test never used", lane)
	}
	n := held.Add(1)
	for peak := lt.peak[lane]; ; {
		old := peak.Load()
		if n <= old || peak.CompareAndSwap(old, n) {
			break
		}
	}
	if n > int64(lt.limit[lane]) {
		return fmt.Errorf("lane %s: %d runs held at once, limit %d", lane, n, lt.limit[lane])
	}
	return nil
}

func (lt *laneTracker) leave(lane string) { lt.held[lane].Add(-1) }

func (lt *laneTracker) report(t *testing.T) {
	for name, peak := range lt.peak {
		t.Logf("lane %s: limit %d, most runs held at once %d", name, lt.limit[name], peak.Load())
	}
}

// taskGate detects two live runs of one task: a claim must find the task's
// gate open.
type taskGate map[int64]*atomic.Bool

func newTaskGate(ids []int64) taskGate {
	g := taskGate{}
	for _, id := range ids {
		g[id] = new(atomic.Bool)
	}
	return g
}

func (g taskGate) enter(l *lease.Lease) error {
	gate := g[l.TaskID]
	if gate == nil {
		return fmt.Errorf("claim returned task %d, which the test never enqueued", l.TaskID)
	}
	if !gate.CompareAndSwap(false, true) {
		return fmt.Errorf("task %d: run %d claimed while another run of it was live", l.TaskID, l.RunID)
	}
	return nil
}

func (g taskGate) leave(l *lease.Lease) { g[l.TaskID].Store(false) }

// worker claims, holds and settles tasks until every one is done. It fails
// an attempt with a short retry now and then, but never the last one, so
// every task ends done exactly once.
type worker struct {
	p         lease.Provider
	f         *failures
	lanes     *laneTracker
	gate      taskGate
	done      *atomic.Int64
	completed map[int64]*atomic.Int64
}

// settleHeld ends a claimed run: heartbeat, a short hold, then complete or
// fail. It leaves the trackers before the settlement is sent.
func (w *worker) settleHeld(l *lease.Lease) {
	ctx := context.Background()
	pause(time.Millisecond)
	if rand.IntN(2) == 0 {
		res, err := w.p.Heartbeat(ctx, lease.Beat{RunID: l.RunID, Lease: longLease})
		if err != nil || len(res) != 1 || res[0].Err != nil {
			w.f.errorf("heartbeat run %d: %v %+v", l.RunID, err, res)
		}
	}
	pause(time.Millisecond)
	s := complete(l.RunID)
	if l.Attempt < l.MaxAttempts && rand.IntN(3) == 0 {
		s = lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "flaky", RetryIn: time.Millisecond}
	}
	w.gate.leave(l)
	w.lanes.leave(l.Lane)
	errs, err := w.p.Settle(ctx, s)
	if err == nil && len(errs) == 1 {
		err = errs[0]
	}
	if err != nil {
		w.f.errorf("settle run %d as %s: %v", l.RunID, s.Outcome, err)
		return
	}
	if s.Outcome == lease.RunCompleted {
		w.completed[l.TaskID].Add(1)
		w.done.Add(1)
	}
}

// take records a claimed run in both trackers.
func (w *worker) take(l *lease.Lease) {
	if err := w.gate.enter(l); err != nil {
		w.f.errorf("%v", err)
	}
	if err := w.lanes.enter(l.Lane); err != nil {
		w.f.errorf("%v", err)
	}
}

// raceSetup creates lanes with the given limits and spreads n tasks over
// them with maxAttempts each.
func raceSetup(t *testing.T, p lease.Provider, limits map[string]int, n, maxAttempts int) ([]int64, *worker) {
	t.Helper()
	var names []string
	for name, limit := range limits {
		mustSetLane(t, p, name, limit)
		names = append(names, name)
	}
	w := &worker{p: p, f: &failures{t: t}, lanes: newLaneTracker(limits), done: new(atomic.Int64),
		completed: map[int64]*atomic.Int64{}}
	var tasks []int64
	for i := range n {
		ep := task(names[i%len(names)], "racer")
		ep.MaxAttempts = maxAttempts
		ep.Payload = []byte(fmt.Sprintf(`{"n":%d}`, i))
		id := mustEnqueue(t, p, ep)
		tasks = append(tasks, id)
		w.completed[id] = new(atomic.Int64)
	}
	w.gate = newTaskGate(tasks)
	return tasks, w
}

// checkAllDoneOnce checks that every task is done, was completed exactly
// once, and that the stored runs agree.
func checkAllDoneOnce(t *testing.T, p lease.Provider, w *worker, tasks []int64) {
	t.Helper()
	if t.Failed() {
		return // the race already reported what broke
	}
	for _, id := range tasks {
		if n := w.completed[id].Load(); n != 1 {
			t.Errorf("task %d: completed %d times by the test, want 1", id, n)
		}
		wantState(t, p, id, lease.TaskDone)
		completed := 0
		for _, r := range mustRuns(t, p, lease.RunFilter{TaskID: id}) {
			if r.State == lease.RunCompleted {
				completed++
			}
		}
		if completed != 1 {
			t.Errorf("task %d: %d completed runs, want 1", id, completed)
		}
	}
	checkConsistent(t, p)
}

// checkConsistent checks what every claim must leave behind, whatever
// happened to the claimer: each task's attempts equal its runs, numbered
// 1..n; a running task has exactly one running run, any other task none;
// every run belongs to a task; no lane has more running runs than its limit.
func checkConsistent(t *testing.T, p lease.Provider) {
	t.Helper()
	tasks := mustTasks(t, p, lease.TaskFilter{})
	runs := mustRuns(t, p, lease.RunFilter{})
	byTask := map[int64][]lease.Run{}
	for _, r := range runs {
		byTask[r.TaskID] = append(byTask[r.TaskID], r)
	}
	for _, tk := range tasks {
		checkTaskRuns(t, tk, byTask[tk.ID])
		delete(byTask, tk.ID)
	}
	for id, rs := range byTask {
		t.Errorf("%d runs belong to task %d, which does not exist", len(rs), id)
	}
	lanes, err := p.Lanes(context.Background())
	if err != nil {
		t.Fatalf("lanes: %v", err)
	}
	for _, l := range lanes {
		if l.Running > l.MaxRunning {
			t.Errorf("lane %s: %d running runs, limit %d", l.Name, l.Running, l.MaxRunning)
		}
	}
}

// checkTaskRuns checks that the task's attempts count its runs. An
// abandoned run may have had its attempt refunded (a claim given back
// unstarted because its caller went away before the answer), so it may
// leave the count and share its attempt number with a later run.
func checkTaskRuns(t *testing.T, tk lease.Task, rs []lease.Run) {
	t.Helper()
	abandoned := 0
	for _, r := range rs {
		if r.State == lease.RunAbandoned {
			abandoned++
		}
	}
	if len(rs) < tk.Attempts || len(rs) > tk.Attempts+abandoned {
		t.Errorf("task %d: %d attempts but %d runs (%d abandoned)", tk.ID, tk.Attempts, len(rs), abandoned)
	}
	seen := map[int]bool{}
	running := 0
	for _, r := range rs {
		if r.Attempt < 1 || r.Attempt > len(rs) || (seen[r.Attempt] && r.State != lease.RunAbandoned) {
			t.Errorf("task %d: run %d has attempt %d; want each of 1..%d once", tk.ID, r.ID, r.Attempt, len(rs))
		}
		seen[r.Attempt] = seen[r.Attempt] || r.State != lease.RunAbandoned
		if r.State == lease.RunRunning {
			running++
		}
	}
	want := 0
	if tk.State == lease.TaskRunning {
		want = 1
	}
	if running != want {
		t.Errorf("task %d is %s with %d running runs, want %d", tk.ID, tk.State, running, want)
	}
}

// untilDone loops fn until every task is done or the deadline passes.
func untilDone(t *testing.T, w *worker, n int, fn func()) {
	deadline := time.Now().Add(raceDeadline)
	for w.done.Load() < int64(n) {
		if time.Now().After(deadline) {
			w.f.errorf("only %d of %d tasks done after %s", w.done.Load(), n, raceDeadline)
			return
		}
		if w.f.n.Load() > 0 {
			return
		}
		fn()
	}
}
