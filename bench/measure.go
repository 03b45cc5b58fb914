package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// op is one timed operation of worker w. It returns how many items (tasks,
// heartbeats) it handled; an op handling zero items is a miss.
type op func(ctx context.Context, w int) (items int, err error)

// load describes one measurement: workers running op in a loop for a
// duration, after an untimed warm-up, or until maxOps ops have been timed.
type load struct {
	Workers int
	Warmup  time.Duration
	Measure time.Duration
	MaxOps  int // 0: no limit
}

// result is what a load measured.
type result struct {
	Ops     int
	Items   int
	Misses  int
	Elapsed time.Duration
	Lat     []time.Duration // one per timed op, sorted
}

// OpsPerSecond is timed ops per second of wall time.
func (r result) OpsPerSecond() float64 { return perSecond(r.Ops, r.Elapsed) }

// ItemsPerSecond is items handled per second of wall time.
func (r result) ItemsPerSecond() float64 { return perSecond(r.Items, r.Elapsed) }

// P returns the q-quantile of the latencies in milliseconds.
func (r result) P(q float64) float64 { return ms(percentile(r.Lat, q)) }

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// percentile returns the nearest-rank q-quantile (0 < q <= 1) of sorted.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

// errStop ends a worker early without failing the measurement (used by ops
// that run out of work they own).
var errStop = errors.New("stop")

// run drives l.Workers goroutines through f: untimed during the warm-up,
// then timed until l.Measure has passed or l.MaxOps ops were timed. Ops in
// flight at the deadline finish and count; none start after it. The first
// error other than errStop stops the others and is returned.
func (l load) run(ctx context.Context, f op) (result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		timing, stop atomic.Bool
		budget       atomic.Int64
		mu           sync.Mutex
		res          result
		firstErr     error
		lastEnd      time.Time
		wg           sync.WaitGroup
	)
	budget.Store(int64(l.MaxOps))
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		stop.Store(true)
		cancel()
	}
	worker := func(w int) {
		defer wg.Done()
		var part result
		var end time.Time
		defer func() {
			mu.Lock()
			res.Ops += part.Ops
			res.Items += part.Items
			res.Misses += part.Misses
			res.Lat = append(res.Lat, part.Lat...)
			if end.After(lastEnd) {
				lastEnd = end
			}
			mu.Unlock()
		}()
		for !stop.Load() && ctx.Err() == nil {
			timed := timing.Load()
			if timed && l.MaxOps > 0 && budget.Add(-1) < 0 {
				return
			}
			start := time.Now()
			n, err := f(ctx, w)
			if err != nil {
				if !errors.Is(err, errStop) && ctx.Err() == nil {
					fail(fmt.Errorf("worker %d: %w", w, err))
				}
				return
			}
			if !timed {
				continue
			}
			end = time.Now()
			part.Ops++
			part.Items += n
			if n == 0 {
				part.Misses++
			}
			part.Lat = append(part.Lat, end.Sub(start))
		}
	}
	wg.Add(l.Workers)
	for w := range l.Workers {
		go worker(w)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	start := l.clock(ctx, &timing, done)
	stop.Store(true)
	<-done
	if err := ctx.Err(); err != nil && firstErr == nil {
		firstErr = err
	}
	if firstErr != nil {
		return res, firstErr
	}
	if lastEnd.After(start) {
		res.Elapsed = lastEnd.Sub(start)
	}
	slices.Sort(res.Lat)
	return res, nil
}

// clock waits out the warm-up, turns timing on, and waits for l.Measure to
// pass (or the workers to finish, or ctx to end). It returns when timing
// started.
func (l load) clock(ctx context.Context, timing *atomic.Bool, done <-chan struct{}) time.Time {
	wait := func(d time.Duration) {
		if d <= 0 {
			return
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-done:
		case <-ctx.Done():
		}
	}
	wait(l.Warmup)
	start := time.Now()
	timing.Store(true)
	if l.Measure <= 0 {
		<-done
		return start
	}
	wait(l.Measure)
	return start
}

func (r result) String() string {
	return fmt.Sprintf("%d ops, %d items in %s (%.0f/s), p50 %.3f ms, p99 %.3f ms",
		r.Ops, r.Items, r.Elapsed.Round(time.Millisecond), r.ItemsPerSecond(), r.P(0.5), r.P(0.99))
}
