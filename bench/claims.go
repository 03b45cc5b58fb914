package bench

import (
	"context"
	"fmt"
	"time"
)

// clients are the concurrency levels of the claim and heartbeat figures.
var clients = []int{1, 4, 16}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}

// measure runs one timed load of workers through fn.
func (b *runner) measure(ctx context.Context, what string, workers int, fn op) (result, error) {
	l := load{Workers: workers, Warmup: b.warmup(), Measure: b.sc.Measure}
	res, err := l.run(ctx, fn)
	if err != nil {
		return res, fmt.Errorf("measure %s: %w", what, err)
	}
	b.log.Info("measured", "what", what, "result", res.String())
	return res, nil
}

// warmup is the untimed start of each measurement: connections open and
// statements are prepared before timing begins.
func (b *runner) warmup() time.Duration {
	return min(max(b.sc.Measure/5, 100*time.Millisecond), time.Second)
}

// maxClaimRate is more claims per second than this kind of machine does
// in any shape; queues are sized from it so that no lane runs dry.
const maxClaimRate = 20_000

// queued is how many tasks each claim measurement starts with: the size's
// figure, or more when the measurements are long enough to drain it. Claims
// pick random lanes, so the busiest lane takes well above the mean: twice
// the tasks the fastest claimer could take keeps every lane supplied.
func (b *runner) queued() int {
	need := int(2 * maxClaimRate * (b.warmup() + b.sc.Measure).Seconds())
	return max(b.sc.Queued, need)
}

// claims measures the baseline and qd's Claim side by side at each level of
// concurrency, then ClaimMany and claim-to-complete cycles.
func (b *runner) claims(ctx context.Context) error {
	f, err := b.open(ctx, "claim", b.sc.Lanes)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	sec := b.r.Section("claim", "Claims, one task per call, against the minimal SKIP LOCKED claim")
	sec.Shape = fmt.Sprintf("%s lanes with no reachable limit; %s queued at the start of every measurement; "+
		"each call claims from one random lane; baseline and qd alternate at each concurrency",
		groupThousands(int64(b.sc.Lanes)), groupThousands(int64(b.queued())))
	for _, c := range clients {
		who := plural(c, "claimer", "claimers")
		if err := f.reset(ctx, b.queued()); err != nil {
			return err
		}
		base, err := b.measure(ctx, "baseline, "+who, c, baselineOp(f))
		if err != nil {
			return err
		}
		bt := sec.Add("baseline, "+who, "claims_per_second", base.OpsPerSecond(), "/s")
		b.base[c] = *bt
		b50 := *sec.Add("baseline, "+who, "p50_ms", base.P(0.50), "ms")
		b99 := *sec.Add("baseline, "+who, "p99_ms", base.P(0.99), "ms")
		if err := f.reset(ctx, b.queued()); err != nil {
			return err
		}
		qd, err := b.measure(ctx, "qd claim, "+who, c, claimOp(f))
		if err != nil {
			return err
		}
		t := sec.Add("qd Claim, "+who, "claims_per_second", qd.OpsPerSecond(), "/s").Against(b.base[c])
		if c == 16 {
			t.Want(">=", 0.6)
		}
		sec.Add("qd Claim, "+who, "p50_ms", qd.P(0.50), "ms").Against(b50)
		sec.Add("qd Claim, "+who, "p99_ms", qd.P(0.99), "ms").Against(b99)
	}
	if err := b.claimMany(ctx, f); err != nil {
		return err
	}
	if err := b.limited(ctx, f); err != nil {
		return err
	}
	if err := b.anyLane(ctx, f); err != nil {
		return err
	}
	return b.cycles(ctx, f)
}

// claimMany measures ClaimMany over a few named lanes and over any lane.
func (b *runner) claimMany(ctx context.Context, f *fixture) error {
	n := b.sc.ClaimBatch
	sec := b.r.Section("claim_many", fmt.Sprintf("Batch claims: ClaimMany of up to %d tasks per call", n))
	sec.Shape = fmt.Sprintf("same lanes and queue as the claims; ratio: tasks/s against the baseline's claims/s at the same concurrency; "+
		"\"16 lanes\" names 16 random lanes per call, \"any lane\" names none (all %s are candidates)", groupThousands(int64(b.sc.Lanes)))
	for _, lanes := range []int{16, 0} {
		shape := "16 lanes"
		if lanes == 0 {
			shape = "any lane"
		}
		for _, c := range clients {
			name := fmt.Sprintf("ClaimMany(%d), %s, %s", n, shape, plural(c, "claimer", "claimers"))
			if err := f.reset(ctx, b.queued()); err != nil {
				return err
			}
			res, err := b.measure(ctx, name, c, claimManyOp(f, n, lanes))
			if err != nil {
				return err
			}
			t := sec.Add(name, "tasks_per_second", res.ItemsPerSecond(), "/s").Against(b.base[c])
			if lanes == 0 && c == 16 {
				t.Want(">=", 1.0)
			}
			sec.Add(name, "tasks_per_call", float64(res.Items)/float64(max(res.Ops, 1)), "tasks")
			sec.Add(name, "p50_ms", res.P(0.50), "ms")
			sec.Add(name, "p99_ms", res.P(0.99), "ms")
		}
	}
	return nil
}

// anyLaneCounts are the numbers of lanes the any-lane claim is measured
// over; the first is the reference.
var anyLaneCounts = []int{10, 1_000, 10_000}

// anyLane measures ClaimMany over any lane, one claimer, with 10, 1,000
// and 10,000 lanes that all have work: its latency should not grow with
// the lanes. f is the fixture of the claims (1,000 lanes).
func (b *runner) anyLane(ctx context.Context, f *fixture) error {
	n := b.sc.ClaimBatch
	sec := b.r.Section("any_lane", fmt.Sprintf("ClaimMany(%d) over any lane, against the number of lanes", n))
	sec.Shape = fmt.Sprintf("one claimer naming no lane; every lane has work (%s queued, spread evenly) and no reachable limit; "+
		"ratio against the fewest lanes", groupThousands(int64(b.queued())))
	var p50, p99 Figure
	for i, lanes := range anyLaneCounts {
		g := f
		if lanes != len(f.lanes) {
			var err error
			if g, err = b.open(ctx, fmt.Sprintf("lanes%d", lanes), lanes); err != nil {
				return err
			}
		}
		err := g.reset(ctx, max(b.queued(), 4*lanes))
		var res result
		if err == nil {
			res, err = b.measure(ctx, fmt.Sprintf("any lane, %d lanes", lanes), 1, claimManyOp(g, n, 0))
		}
		if g != f {
			g.close(ctx)
		}
		if err != nil {
			return err
		}
		name := fmt.Sprintf("ClaimMany(%d), any lane, %s lanes", n, groupThousands(int64(lanes)))
		a := sec.Add(name, "p50_ms", res.P(0.50), "ms")
		z := sec.Add(name, "p99_ms", res.P(0.99), "ms")
		if i == 0 {
			p50, p99 = *a, *z
			continue
		}
		a.Against(p50).Want("<=", 1.2)
		z.Against(p99).Want("<=", 1.2)
	}
	return nil
}

// cycles measures a claim followed by the completion of its run.
func (b *runner) cycles(ctx context.Context, f *fixture) error {
	sec := b.r.Section("cycle", "Claim then complete: two calls per task")
	sec.Shape = "Claim of one random lane, then Settle(completed) of its run; ratio against the baseline's claims/s"
	for _, c := range clients {
		name := "claim+complete, " + plural(c, "worker", "workers")
		if err := f.reset(ctx, b.queued()); err != nil {
			return err
		}
		res, err := b.measure(ctx, name, c, cycleOp(f))
		if err != nil {
			return err
		}
		sec.Add(name, "cycles_per_second", res.OpsPerSecond(), "/s").Against(b.base[c])
		sec.Add(name, "p50_ms", res.P(0.50), "ms")
		sec.Add(name, "p99_ms", res.P(0.99), "ms")
	}
	return nil
}
