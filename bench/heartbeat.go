package bench

import (
	"context"
	"fmt"
)

// liveRuns is how many live runs the soak and the cost share assume: the
// issue's "1,000 live runs heartbeating once per second".
const liveRuns = 1_000

// heartbeats measures single and batched heartbeats of live runs, each
// caller beating only the runs it owns, as a supervisor does.
func (b *runner) heartbeats(ctx context.Context) error {
	f, err := b.open(ctx, "beat", b.sc.Lanes)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	per := b.sc.LiveRuns / clients[len(clients)-1]
	if err := f.reset(ctx, b.sc.LiveRuns); err != nil {
		return err
	}
	ids, err := claimLive(ctx, f, b.sc.LiveRuns)
	if err != nil {
		return err
	}
	if err := f.analyze(ctx); err != nil {
		return err
	}
	owned := make([][]int64, 0, len(ids)/per)
	for i := 0; i+per <= len(ids); i += per {
		owned = append(owned, ids[i:i+per])
	}
	sec := b.r.Section("heartbeat", "Heartbeats of live runs")
	sec.Shape = fmt.Sprintf("%s live runs; each caller beats its own %d in turn; ratio: heartbeats/s against the baseline's claims/s "+
		"at the same concurrency", groupThousands(int64(len(ids))), per)
	batch := b.sc.BatchBeats
	var batched16 float64
	for _, size := range []int{1, batch} {
		for _, c := range clients {
			name := fmt.Sprintf("%s per call, %s", plural(size, "beat", "beats"), plural(c, "caller", "callers"))
			res, err := b.measure(ctx, name, c, heartbeatOp(f, owned, size))
			if err != nil {
				return err
			}
			sec.Add(name, "heartbeats_per_second", res.ItemsPerSecond(), "/s").Against(b.base[c])
			sec.Add(name, "p50_ms", res.P(0.50), "ms")
			sec.Add(name, "p99_ms", res.P(0.99), "ms")
			if size == batch && c == clients[len(clients)-1] {
				batched16 = res.ItemsPerSecond()
			}
		}
	}
	// Batched heartbeats at 16 callers keep both cores busy, as the
	// baseline at 16 claimers does: the machine's budget for heartbeats.
	// 1,000 beats a second cost that share of it.
	share := 100 * float64(liveRuns) / batched16
	sec.Add(fmt.Sprintf("%s live runs beating once a second, %d per call", groupThousands(liveRuns), batch),
		"share_of_budget", share, "%").Want("<=", 10)
	return nil
}
