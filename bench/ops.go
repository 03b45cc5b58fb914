package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/qd-run/qd/lease"
)

// benchLease is long enough that no lease expires during a measurement, so
// claims never reap and heartbeats are never refused.
const benchLease = time.Hour

// errDry reports a queue that ran out of work during a measurement: the
// figures would then measure empty claims, so the bench stops instead.
var errDry = errors.New("queue ran dry during the measurement (raise the queued tasks of this size)")

// baselineSQL is the minimal SKIP LOCKED claim the others are held to: one
// autocommit statement, no lane lock, no run row.
const baselineSQL = `UPDATE {s}.tasks SET state = 'running'
WHERE id = (SELECT id FROM {s}.tasks
            WHERE state = 'queued' AND lane = $1
            ORDER BY priority, run_after, id
            FOR UPDATE SKIP LOCKED LIMIT 1)`

func (f *fixture) randomLane() string { return f.lanes[rand.IntN(len(f.lanes))] }

// randomLanes returns n distinct lanes.
func (f *fixture) randomLanes(n int) []string {
	idx := rand.Perm(len(f.lanes))[:min(n, len(f.lanes))]
	out := make([]string, len(idx))
	for i, j := range idx {
		out[i] = f.lanes[j]
	}
	return out
}

func claimParams(lanes []string) lease.ClaimParams {
	return lease.ClaimParams{Lanes: lanes, Owner: "bench", Instance: "bench-1", Lease: benchLease}
}

// baselineOp claims one task of a random lane with baselineSQL.
func baselineOp(f *fixture) op {
	stmt := f.sql(baselineSQL)
	return func(ctx context.Context, _ int) (int, error) {
		lane := f.randomLane()
		tag, err := f.pool().Exec(ctx, stmt, lane)
		if err != nil {
			return 0, fmt.Errorf("baseline claim in lane %s: %w", lane, err)
		}
		if tag.RowsAffected() == 0 {
			return 0, fmt.Errorf("baseline claim in lane %s: %w", lane, errDry)
		}
		return 1, nil
	}
}

// claimOp claims one task of a random lane with the provider's Claim.
func claimOp(f *fixture) op {
	return func(ctx context.Context, _ int) (int, error) {
		lane := f.randomLane()
		if _, err := f.p.Claim(ctx, claimParams([]string{lane})); err != nil {
			return 0, dry(fmt.Errorf("claim in lane %s: %w", lane, err))
		}
		return 1, nil
	}
}

// claimManyOp claims up to n tasks per call over lanes random lanes, or any
// lane when lanes is 0.
func claimManyOp(f *fixture, n, lanes int) op {
	return func(ctx context.Context, _ int) (int, error) {
		var names []string
		if lanes > 0 {
			names = f.randomLanes(lanes)
		}
		got, err := f.p.ClaimMany(ctx, claimParams(names), n)
		if err != nil {
			return 0, fmt.Errorf("claim %d tasks: %w", n, err)
		}
		if len(got) == 0 {
			return 0, fmt.Errorf("claim %d tasks: %w", n, errDry)
		}
		return len(got), nil
	}
}

// cycleOp claims one task of a random lane and completes its run, in two
// calls as a supervisor does for a task that ends at once.
func cycleOp(f *fixture) op {
	return func(ctx context.Context, _ int) (int, error) {
		lane := f.randomLane()
		l, err := f.p.Claim(ctx, claimParams([]string{lane}))
		if err != nil {
			return 0, dry(fmt.Errorf("claim in lane %s: %w", lane, err))
		}
		errs, err := f.p.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "bench"})
		if err != nil {
			return 0, fmt.Errorf("complete run %d: %w", l.RunID, err)
		}
		if len(errs) != 1 || errs[0] != nil {
			return 0, fmt.Errorf("complete run %d: %v", l.RunID, errs)
		}
		return 1, nil
	}
}

// dry turns ErrNoWork into errDry.
func dry(err error) error {
	if errors.Is(err, lease.ErrNoWork) {
		return fmt.Errorf("%w: %w", err, errDry)
	}
	return err
}

// heartbeatOp heartbeats the runs worker w owns, batch of them per call,
// going round their list.
func heartbeatOp(f *fixture, owned [][]int64, batch int) op {
	next := make([]int, len(owned))
	return func(ctx context.Context, w int) (int, error) {
		ids := owned[w]
		beats := make([]lease.Beat, batch)
		for i := range beats {
			beats[i] = lease.Beat{RunID: ids[(next[w]+i)%len(ids)], Lease: benchLease}
		}
		next[w] = (next[w] + batch) % len(ids)
		return beat(ctx, f, beats)
	}
}

// beat sends one Heartbeat call and checks every answer.
func beat(ctx context.Context, f *fixture, beats []lease.Beat) (int, error) {
	res, err := f.p.Heartbeat(ctx, beats...)
	if err != nil {
		return 0, fmt.Errorf("heartbeat %d runs: %w", len(beats), err)
	}
	if len(res) != len(beats) {
		return 0, fmt.Errorf("heartbeat %d runs: got %d answers", len(beats), len(res))
	}
	for _, r := range res {
		if r.Err != nil {
			return 0, fmt.Errorf("heartbeat run %d: %w", r.RunID, r.Err)
		}
	}
	return len(beats), nil
}

// claimLive claims n tasks (any lane) and returns their run ids.
func claimLive(ctx context.Context, f *fixture, n int) ([]int64, error) {
	var ids []int64
	for len(ids) < n {
		got, err := f.p.ClaimMany(ctx, claimParams(nil), min(100, n-len(ids)))
		if err != nil {
			return nil, fmt.Errorf("claim live runs: %w", err)
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("claim live runs: %d of %d: %w", len(ids), n, errDry)
		}
		for _, l := range got {
			ids = append(ids, l.RunID)
		}
	}
	return ids, nil
}
