package leasetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure racing claims and settlements, some cut short by their callers at
// random moments, leave every task and run consistent.
func testClaimAtomic(t *testing.T, p lease.Provider) {
	limits := map[string]int{"atom-a": 3, "atom-b": 2, "atom-c": 1}
	_, w := raceSetup(t, p, limits, 60, 100)
	var st cutStats
	st.latency.Store(int64(time.Millisecond))
	race(24, func(int) {
		for range 15 {
			st.round(p, w.f)
		}
	})
	if st.claimed.Load() == 0 {
		t.Errorf("no claim succeeded in %d rounds", 24*15)
	}
	t.Logf("%d claims succeeded; contexts cut %d claims and %d settlements", st.claimed.Load(), st.cutClaims.Load(), st.cutSettles.Load())
	checkConsistent(t, p)
}

// cutStats drives claims whose context is cancelled at a random moment
// within about twice the time a claim takes, so that cuts land before,
// during and after the claim's commit whatever the provider's speed.
type cutStats struct {
	latency                        atomic.Int64 // of the last uncut claim, in ns
	claimed, cutClaims, cutSettles atomic.Int64
}

func (st *cutStats) round(p lease.Provider, f *failures) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	timer := time.AfterFunc(rand.N(2*time.Duration(st.latency.Load())+1), cancel)
	defer timer.Stop()
	begin := time.Now()
	l, err := p.Claim(ctx, claimIn())
	if ctx.Err() == nil {
		st.latency.Store(int64(time.Since(begin)))
	} else if d := st.latency.Load(); d < int64(time.Second) {
		st.latency.CompareAndSwap(d, d*3/2) // cut too often: wait longer
	}
	switch {
	case err != nil && ctx.Err() != nil:
		st.cutClaims.Add(1)
		return
	case errors.Is(err, lease.ErrNoWork):
		pause(time.Millisecond)
		return
	case err != nil:
		f.errorf("claim: %v", err)
		return
	}
	st.claimed.Add(1)
	s := complete(l.RunID)
	switch rand.IntN(10) {
	case 0: // keep it: the run stays live
		return
	case 1, 2, 3:
		s = lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, RetryIn: time.Millisecond}
	case 4:
		s = lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned}
	}
	// The settlement races the same cancellation.
	errs, err := p.Settle(ctx, s)
	switch {
	case err != nil && ctx.Err() != nil:
		st.cutSettles.Add(1)
	case err != nil:
		f.errorf("settle run %d: %v", l.RunID, err)
	case errs[0] != nil:
		f.errorf("settle run %d: %v", l.RunID, errs[0])
	}
}

// Ensure a task never has two live runs while many goroutines claim,
// heartbeat, fail and complete in one lane.
func testClaimExclusiveUnderRace(t *testing.T, p lease.Provider) {
	tasks, w := raceSetup(t, p, map[string]int{"excl": 8}, 40, 3)
	race(24, func(int) {
		untilDone(t, w, len(tasks), func() {
			l, err := p.Claim(context.Background(), claimIn("excl"))
			if errors.Is(err, lease.ErrNoWork) {
				pause(2 * time.Millisecond)
				return
			}
			if err != nil {
				w.f.errorf("claim: %v", err)
				return
			}
			w.take(l)
			w.settleHeld(l)
		})
	})
	checkAllDoneOnce(t, p, w, tasks)
}

// Ensure no lane ever holds more live runs than its limit while dozens of
// goroutines claim over several lanes, some with limit 1 and some more.
func testClaimLaneBoundUnderRace(t *testing.T, p lease.Provider) {
	limits := map[string]int{"bound-a": 1, "bound-b": 1, "bound-c": 2, "bound-d": 3, "bound-e": 1, "bound-f": 4}
	names := []string{"bound-a", "bound-b", "bound-c", "bound-d", "bound-e", "bound-f"}
	tasks, w := raceSetup(t, p, limits, 200, 2)
	race(32, func(int) {
		untilDone(t, w, len(tasks), func() {
			var lanes []string // none: any lane
			if rand.IntN(2) == 0 {
				for _, i := range rand.Perm(len(names))[:1+rand.IntN(3)] {
					lanes = append(lanes, names[i])
				}
			}
			l, err := p.Claim(context.Background(), claimIn(lanes...))
			if errors.Is(err, lease.ErrNoWork) {
				pause(2 * time.Millisecond)
				return
			}
			if err != nil {
				w.f.errorf("claim %v: %v", lanes, err)
				return
			}
			w.take(l)
			w.settleHeld(l)
		})
	})
	w.lanes.report(t)
	checkAllDoneOnce(t, p, w, tasks)
}

// Ensure ClaimMany never takes a lane past its limit, alone or racing.
func testClaimManyLaneBound(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustSetLane(t, p, "many-a", 2)
	paused := true
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "many-p", Paused: &paused}); err != nil {
		t.Fatalf("pause lane: %v", err)
	}
	for range 4 {
		for _, lane := range []string{"many-a", "many-b", "many-p"} {
			mustEnqueue(t, p, task(lane, "a"))
		}
	}
	got, err := p.ClaimMany(ctx, claimIn(), 10)
	if err != nil {
		t.Fatalf("claim many: %v", err)
	}
	perLane := map[string]int{}
	for _, l := range got {
		perLane[l.Lane]++
	}
	if len(got) != 3 || perLane["many-a"] != 2 || perLane["many-b"] != 1 {
		t.Fatalf("claim many of 10: got %v per lane, want many-a:2 many-b:1", perLane)
	}
	if again, err := p.ClaimMany(ctx, claimIn(), 10); err != nil || len(again) != 0 {
		t.Fatalf("claim many with every lane full: got %d leases, error %v; want none and nil", len(again), err)
	}
	mustSettle(t, p, complete(got[0].RunID))
	if one, err := p.ClaimMany(ctx, claimIn(got[0].Lane), 5); err != nil || len(one) != 1 {
		t.Fatalf("claim many after one settled: got %d leases, error %v; want 1", len(one), err)
	}
	checkConsistent(t, p)

	tasks, w := raceSetup(t, p, map[string]int{"many-r1": 2, "many-r2": 3}, 40, 2)
	race(8, func(int) {
		untilDone(t, w, len(tasks), func() {
			ls, err := p.ClaimMany(ctx, claimIn("many-r1", "many-r2"), 1+rand.IntN(4))
			if err != nil {
				w.f.errorf("claim many: %v", err)
				return
			}
			if len(ls) == 0 {
				pause(2 * time.Millisecond)
			}
			for _, l := range ls {
				w.take(l)
			}
			for _, l := range ls {
				w.settleHeld(l)
			}
		})
	})
	w.lanes.report(t)
	checkAllDoneOnce(t, p, w, tasks)
}
