package bench

import (
	"context"
	"fmt"
	"math"

	"github.com/qd-run/qd/lease"
)

// benchLimit is the rate limit the limited claims go through: a rate no
// claimer reaches, so that the figure is the cost of taking a unit, never
// a wait for one.
const benchLimit = "bench"

// limitedClaimOp is claimOp through benchLimit.
func limitedClaimOp(f *fixture) op {
	return func(ctx context.Context, _ int) (int, error) {
		lane := f.randomLane()
		cp := claimParams([]string{lane})
		cp.Limits = []string{benchLimit}
		if _, err := f.p.Claim(ctx, cp); err != nil {
			return 0, dry(fmt.Errorf("claim in lane %s through limit %s: %w", lane, benchLimit, err))
		}
		return 1, nil
	}
}

// limited measures qd's Claim through a rate limit against the same claim
// without one, alternating, at one claimer and at 16: every claimer of a
// limit waits on its row, so at 16 the limit serialises them.
func (b *runner) limited(ctx context.Context, f *fixture) error {
	burst := math.MaxInt32
	if _, err := f.p.SetLimit(ctx, lease.LimitUpdate{Name: benchLimit, Rate: math.MaxInt32, Per: 1e9, Burst: &burst}); err != nil {
		return fmt.Errorf("set limit: %w", err)
	}
	sec := b.r.Section("claim_limit", "Claims through a rate limit (docs/limits.md), against the same claims without one")
	sec.Shape = "the claims' lanes and queue; one limit shared by every claimer, at a rate none reaches; alternating"
	for _, c := range []int{1, 16} {
		who := plural(c, "claimer", "claimers")
		if err := f.reset(ctx, b.queued()); err != nil {
			return err
		}
		// Named apart from the claims section's figures of the same
		// claim: a ratio names its base by case and metric.
		plain, err := b.measure(ctx, "qd Claim without a limit, "+who, c, claimOp(f))
		if err != nil {
			return err
		}
		p50 := *sec.Add("qd Claim without a limit, "+who, "p50_ms", plain.P(0.50), "ms")
		rate := *sec.Add("qd Claim without a limit, "+who, "claims_per_second", plain.OpsPerSecond(), "/s")
		if err := f.reset(ctx, b.queued()); err != nil {
			return err
		}
		lim, err := b.measure(ctx, "qd Claim through a limit, "+who, c, limitedClaimOp(f))
		if err != nil {
			return err
		}
		t := sec.Add("qd Claim through a limit, "+who, "p50_ms", lim.P(0.50), "ms").Against(p50)
		if c == 1 {
			t.Want("<=", 1.2)
		}
		sec.Add("qd Claim through a limit, "+who, "claims_per_second", lim.OpsPerSecond(), "/s").Against(rate)
	}
	return nil
}
