package leasetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Run runs the conformance suite. newProvider is called once in each subtest
// and must return an empty provider isolated from every other one; it
// registers its own cleanup (including Close) with t.Cleanup.
func Run(t *testing.T, newProvider func(t *testing.T) lease.Provider) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.run(t, newProvider(t))
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, p lease.Provider)
}

// cases lists every subtest. The first seven are the invariants of package
// lease, in the order its doc comment numbers them.
var cases = []testCase{
	{"Claim/Atomic", testClaimAtomic},
	{"Claim/ExclusiveUnderRace", testClaimExclusiveUnderRace},
	{"Claim/LaneBoundUnderRace", testClaimLaneBoundUnderRace},
	{"Claim/EmptyIsNotAnError", testClaimEmptyIsNotAnError},
	{"Reap/ExpiredLease", testReapExpiredLease},
	{"Fencing/StaleRun", testFencingStaleRun},
	{"Claim/Order", testClaimOrder},
	{"Claim/Lease", testClaimLease},
	{"ClaimMany/LaneBound", testClaimManyLaneBound},
	{"Claim/Token", testClaimToken},
	{"Reap/UnderRace", testReapUnderRace},
	{"Enqueue/Defaults", testEnqueueDefaults},
	{"Enqueue/Dedupe", testEnqueueDedupe},
	{"Enqueue/Invalid", testEnqueueInvalid},
	{"Heartbeat/ExtendsLease", testHeartbeatExtendsLease},
	{"Heartbeat/Batch", testHeartbeatBatch},
	{"Settle/Idempotent", testSettleIdempotent},
	{"Settle/FailRetriesThenFails", testSettleFailRetriesThenFails},
	{"Settle/AbandonRefund", testSettleAbandonRefund},
	{"Settle/AbandonBackoff", testSettleAbandonBackoff},
	{"Settle/LogError", testSettleLogError},
	{"Settle/Usage", testSettleUsage},
	{"Settle/LastSummary", testSettleLastSummary},
	{"Settle/LateCompletion", testSettleLateCompletion},
	{"Cancel/Queued", testCancelQueued},
	{"Cancel/Running", testCancelRunning},
	{"Cancel/Requested", testCancelRequested},
	{"Notify/FailedByReap", testNotifyFailedByReap},
	{"Notify/FailedByAbandon", testNotifyFailedByAbandon},
	{"Notify/SettleEvent", testNotifySettleEvent},
	{"Notify/Once", testNotifyOnce},
	{"Notify/ClaimOnce", testNotifyClaimOnce},
	{"Notify/Retry", testNotifyRetry},
	{"Notify/GiveUp", testNotifyGiveUp},
	{"Retry", testRetry},
	{"AbandonOwner", testAbandonOwner},
	{"Lanes/PauseAndLimit", testLanesPauseAndLimit},
	{"Agents/Pause", testAgentsPause},
	{"Agents/PauseUnderRace", testAgentsPauseUnderRace},
	{"Prune", testPrune},
	{"Periodic/ExactlyOnce", testPeriodicExactlyOnce},
	{"Listings", testListings},
	{"Chain/WaitingNeverClaimed", testChainWaitingNeverClaimed},
	{"Chain/Results", testChainResults},
	{"Chain/FailureCancels", testChainFailureCancels},
	{"Chain/Enqueue", testChainEnqueue},
	{"Chain/Cancel", testChainCancel},
	{"Chain/EnqueueRacesFinish", testChainEnqueueRacesFinish},
	{"Chain/LateCompletion", testChainLateCompletion},
	{"Chain/Prune", testChainPrune},
	{"Limit/RateUnderRace", testLimitRateUnderRace},
	{"Limit/HoldAndSpend", testLimitHoldAndSpend},
	{"Settle/Deferral", testSettleDeferral},
	{"Budget/StopsClaims", testBudgetStopsClaims},
}

// Short leases that expire during a test, and long ones that must not.
const (
	shortLease = time.Second
	pastShort  = shortLease + 600*time.Millisecond
	longLease  = 2 * time.Minute
)

// claimIn returns claim parameters for the given lanes (any lane when none)
// with a lease that outlives the test.
func claimIn(lanes ...string) lease.ClaimParams {
	return lease.ClaimParams{Lanes: lanes, Owner: "leasetest", Instance: "i1", Lease: longLease}
}

func task(lane, agent string) lease.EnqueueParams {
	return lease.EnqueueParams{Lane: lane, Agent: agent, Payload: []byte(`{}`)}
}

func mustEnqueue(tb testing.TB, p lease.Provider, ep lease.EnqueueParams) int64 {
	tb.Helper()
	id, existed, err := p.Enqueue(context.Background(), ep)
	if err != nil {
		tb.Fatalf("enqueue %+v: %v", ep, err)
	}
	if existed {
		tb.Fatalf("enqueue %+v: got existed=true for a new task", ep)
	}
	return id
}

// MustClaim claims with cp and fails the test unless a task was claimed.
func MustClaim(tb testing.TB, p lease.Provider, cp lease.ClaimParams) *lease.Lease {
	tb.Helper()
	l, err := p.Claim(context.Background(), cp)
	if err != nil {
		tb.Fatalf("claim %v: %v", cp.Lanes, err)
	}
	return l
}

func mustNoWork(tb testing.TB, p lease.Provider, cp lease.ClaimParams) {
	tb.Helper()
	l, err := p.Claim(context.Background(), cp)
	if !errors.Is(err, lease.ErrNoWork) {
		tb.Fatalf("claim %v: got lease %+v, error %v; want ErrNoWork", cp.Lanes, l, err)
	}
}

// settle settles one run and returns its own error; a failure of the call
// as a whole stops the test.
func settle(tb testing.TB, p lease.Provider, s lease.Settlement) error {
	tb.Helper()
	errs, err := p.Settle(context.Background(), s)
	if err != nil {
		tb.Fatalf("settle run %d: %v", s.RunID, err)
	}
	if len(errs) != 1 {
		tb.Fatalf("settle run %d: got %d results, want 1", s.RunID, len(errs))
	}
	return errs[0]
}

func mustSettle(tb testing.TB, p lease.Provider, s lease.Settlement) {
	tb.Helper()
	if err := settle(tb, p, s); err != nil {
		tb.Fatalf("settle run %d as %s: %v", s.RunID, s.Outcome, err)
	}
}

func complete(id int64) lease.Settlement {
	return lease.Settlement{RunID: id, Outcome: lease.RunCompleted, Summary: "ok"}
}

// beat sends one heartbeat and returns its result.
func beat(tb testing.TB, p lease.Provider, b lease.Beat) lease.BeatResult {
	tb.Helper()
	res, err := p.Heartbeat(context.Background(), b)
	if err != nil {
		tb.Fatalf("heartbeat run %d: %v", b.RunID, err)
	}
	if len(res) != 1 || res[0].RunID != b.RunID {
		tb.Fatalf("heartbeat run %d: got %+v, want one result for that run", b.RunID, res)
	}
	return res[0]
}

// MustTask reads task id and fails the test when it cannot.
func MustTask(tb testing.TB, p lease.Provider, id int64) lease.Task {
	tb.Helper()
	tk, err := p.Task(context.Background(), id)
	if err != nil {
		tb.Fatalf("task %d: %v", id, err)
	}
	return tk
}

// MustRun reads run id and fails the test when it cannot.
func MustRun(tb testing.TB, p lease.Provider, id int64) lease.Run {
	tb.Helper()
	r, err := p.Run(context.Background(), id)
	if err != nil {
		tb.Fatalf("run %d: %v", id, err)
	}
	return r
}

func mustRuns(tb testing.TB, p lease.Provider, f lease.RunFilter) []lease.Run {
	tb.Helper()
	rs, err := p.Runs(context.Background(), f)
	if err != nil {
		tb.Fatalf("runs %+v: %v", f, err)
	}
	return rs
}

func mustTasks(tb testing.TB, p lease.Provider, f lease.TaskFilter) []lease.Task {
	tb.Helper()
	ts, err := p.Tasks(context.Background(), f)
	if err != nil {
		tb.Fatalf("tasks %+v: %v", f, err)
	}
	return ts
}

func mustSetLane(tb testing.TB, p lease.Provider, name string, maxRunning int) lease.Lane {
	tb.Helper()
	l, err := p.SetLane(context.Background(), lease.LaneUpdate{Name: name, MaxRunning: &maxRunning})
	if err != nil {
		tb.Fatalf("set lane %s to %d: %v", name, maxRunning, err)
	}
	return l
}

func wantState(tb testing.TB, p lease.Provider, id int64, want lease.TaskState) lease.Task {
	tb.Helper()
	tk := MustTask(tb, p, id)
	if tk.State != want {
		tb.Fatalf("task %d: state %s, want %s", id, tk.State, want)
	}
	return tk
}

// near reports whether a and b are within tol of each other. Providers may
// store times with less than nanosecond precision.
func near(a, b time.Time, tol time.Duration) bool {
	d := a.Sub(b)
	return d <= tol && d >= -tol
}

// isSilence reports whether s is the reaper's summary for a silence of a
// few seconds.
func isSilence(s string) bool {
	for sec := 0; sec <= 30; sec++ {
		if s == lease.SilenceSummary(time.Duration(sec)*time.Second) {
			return true
		}
	}
	return false
}

func idsOf[T any](s []T, id func(T) int64) []int64 {
	out := make([]int64, 0, len(s))
	for _, v := range s {
		out = append(out, id(v))
	}
	slices.Sort(out)
	return out
}

// failures reports errors from racing goroutines, at most ten of them, so
// that one broken rule does not flood the log.
type failures struct {
	t *testing.T
	n atomic.Int64
}

func (f *failures) errorf(format string, args ...any) {
	if f.n.Add(1) <= 10 {
		f.t.Error(fmt.Sprintf(format, args...))
	}
}
