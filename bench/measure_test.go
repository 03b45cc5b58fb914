package bench

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	// Ensure percentiles are nearest-rank over the sorted latencies.
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	for _, tt := range []struct {
		name string
		lat  []time.Duration
		q    float64
		want time.Duration
	}{
		{"Empty", nil, 0.5, 0},
		{"One", ms(7), 0.99, 7 * time.Millisecond},
		{"MedianOdd", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"MedianEven", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"P99Of100", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"P50Of100", ms(hundred...), 0.50, 50 * time.Millisecond},
		{"Max", ms(1, 2, 3), 1, 3 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.lat, tt.q); got != tt.want {
				t.Fatalf("percentile(%v, %v) = %v, want %v", tt.lat, tt.q, got, tt.want)
			}
		})
	}
}

func TestLoad_Run(t *testing.T) {
	t.Run("MaxOps", func(t *testing.T) {
		// Ensure a budget of ops is timed exactly, across workers, after an
		// untimed warm-up.
		var calls atomic.Int64
		res, err := load{Workers: 4, Warmup: 20 * time.Millisecond, MaxOps: 50}.run(context.Background(),
			func(ctx context.Context, w int) (int, error) {
				calls.Add(1)
				time.Sleep(time.Millisecond)
				return 2, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if res.Ops != 50 || res.Items != 100 || len(res.Lat) != 50 {
			t.Fatalf("ops %d items %d latencies %d, want 50, 100, 50", res.Ops, res.Items, len(res.Lat))
		}
		if calls.Load() <= 50 {
			t.Fatalf("%d calls in all: the warm-up ran none", calls.Load())
		}
		if res.P(0.5) < 1 {
			t.Fatalf("p50 %.3f ms, want at least the 1 ms each op sleeps", res.P(0.5))
		}
	})
	t.Run("Duration", func(t *testing.T) {
		// Ensure a timed load stops after its duration and reports a rate
		// over the time it measured.
		res, err := load{Workers: 2, Measure: 50 * time.Millisecond}.run(context.Background(),
			func(ctx context.Context, w int) (int, error) {
				time.Sleep(time.Millisecond)
				return 1, nil
			})
		if err != nil {
			t.Fatal(err)
		}
		if res.Elapsed < 50*time.Millisecond || res.Ops == 0 {
			t.Fatalf("elapsed %s with %d ops, want at least 50ms and some ops", res.Elapsed, res.Ops)
		}
		if got := res.OpsPerSecond(); got <= 0 || got > float64(res.Ops)/0.05 {
			t.Fatalf("rate %.0f/s for %d ops in %s", got, res.Ops, res.Elapsed)
		}
	})
	t.Run("Error", func(t *testing.T) {
		// Ensure the first failing op stops the load and its error is returned.
		boom := errors.New("boom")
		var n atomic.Int64
		_, err := load{Workers: 3, Measure: 10 * time.Second}.run(context.Background(),
			func(ctx context.Context, w int) (int, error) {
				if n.Add(1) == 20 {
					return 0, boom
				}
				return 1, nil
			})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
	})
}
