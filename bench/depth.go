package bench

import (
	"context"
	"fmt"
	"time"
)

// depth measures claim latency as the queue grows, topping the queue up to
// each depth before measuring so that every point starts exactly there.
func (b *runner) depth(ctx context.Context) error {
	f, err := b.open(ctx, "depth", b.sc.DepthLanes)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	if err := f.reset(ctx, 0); err != nil {
		return err
	}
	sec := b.r.Section("depth", "Claim latency with the queue deep")
	sec.Shape = fmt.Sprintf("one claimer, %s timed claims of one random lane per point over %s; "+
		"queue topped up to the depth and analyzed before each point; ratio against the shallowest",
		groupThousands(int64(b.sc.DepthOps)), plural(b.sc.DepthLanes, "lane", "lanes"))
	var ref [2]Figure
	for i, n := range b.sc.Depths {
		if err := b.topUp(ctx, f, n); err != nil {
			return err
		}
		name := groupThousands(int64(n)) + " queued"
		if err := b.point(ctx, sec, f, name, i == 0, &ref); err != nil {
			return err
		}
	}
	return nil
}

// history measures claim latency as finished tasks (each with its run)
// pile up beside a small queue.
func (b *runner) history(ctx context.Context) error {
	f, err := b.open(ctx, "history", b.sc.DepthLanes)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	if err := f.reset(ctx, 0); err != nil {
		return err
	}
	sec := b.r.Section("history", "Claim latency with finished tasks in history")
	sec.Shape = fmt.Sprintf("one claimer, %s timed claims of one random lane per point over %s; %s queued (topped up "+
		"before each point) beside the finished tasks, each with one completed run; analyzed before each point; "+
		"ratio against no history", groupThousands(int64(b.sc.DepthOps)), plural(b.sc.DepthLanes, "lane", "lanes"),
		groupThousands(int64(b.sc.DepthBase)))
	var ref [2]Figure
	have := 0
	for i, m := range b.sc.Histories {
		if m > have {
			b.log.Info("adding history", "finished_tasks", m-have)
			if err := f.addFinished(ctx, m-have); err != nil {
				return err
			}
			have = m
		}
		if err := b.topUp(ctx, f, b.sc.DepthBase); err != nil {
			return err
		}
		name := groupThousands(int64(m)) + " finished"
		if err := b.point(ctx, sec, f, name, i == 0, &ref); err != nil {
			return err
		}
	}
	return nil
}

// topUp queues tasks until n are queued, then analyzes.
func (b *runner) topUp(ctx context.Context, f *fixture, n int) error {
	var queued int
	err := f.pool().QueryRow(ctx, f.sql(`SELECT count(*) FROM {s}.tasks WHERE state = 'queued'`)).Scan(&queued)
	if err != nil {
		return fmt.Errorf("count queued tasks in %s: %w", f.schema, err)
	}
	if n > queued {
		if err := f.addQueued(ctx, n-queued); err != nil {
			return err
		}
	}
	return f.analyze(ctx)
}

// point measures one depth or history point; the first is the reference.
func (b *runner) point(ctx context.Context, sec *Section, f *fixture, name string, first bool, ref *[2]Figure) error {
	// A short warm-up: it takes tasks from the queue being measured.
	l := load{Workers: 1, Warmup: min(b.warmup(), 200*time.Millisecond), MaxOps: b.sc.DepthOps}
	res, err := l.run(ctx, claimOp(f))
	if err != nil {
		return fmt.Errorf("measure claims with %s: %w", name, err)
	}
	b.log.Info("measured", "what", "claims with "+name, "result", res.String())
	p50 := sec.Add(name, "p50_ms", res.P(0.50), "ms")
	if first {
		ref[0] = *p50
	}
	p50.Against(ref[0])
	p99 := sec.Add(name, "p99_ms", res.P(0.99), "ms")
	if first {
		ref[1] = *p99
	}
	p99.Against(ref[1])
	if !first {
		p99.Want("<=", 1.2)
	}
	return nil
}
