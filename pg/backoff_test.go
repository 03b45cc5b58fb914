package pg_test

import (
	"context"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure the SQL backoff and lease.Backoff give the same delays: base
// doubled per failed attempt, capped at an hour, spread over ±20%. The SQL
// one serves a failed run that names no retry delay, with
// lease.DefaultBackoffBase as its base (the conformance suite's
// Settle/FailRetriesThenFails checks that default).
func TestBackoff(t *testing.T) {
	tests := []struct {
		base    time.Duration
		attempt int
		want    time.Duration // before jitter
	}{
		{10 * time.Second, 0, 10 * time.Second},
		{10 * time.Second, 1, 10 * time.Second},
		{10 * time.Second, 2, 20 * time.Second},
		{10 * time.Second, 3, 40 * time.Second},
		{10 * time.Second, 9, 2560 * time.Second},
		{10 * time.Second, 10, time.Hour},
		{10 * time.Second, 1000, time.Hour},
		{time.Second, 5, 16 * time.Second},
		{250 * time.Millisecond, 3, time.Second},
		{time.Millisecond, 31, time.Hour},
		{90 * time.Minute, 1, time.Hour},
	}
	const samples = 400
	p := MustOpen(t)
	for _, tt := range tests {
		lo, hi := tt.want*8/10-time.Microsecond, tt.want*12/10+time.Microsecond
		check := func(side string, min, max time.Duration) {
			t.Helper()
			if min < lo || max > hi {
				t.Errorf("%s backoff(%d, %s) spans %s..%s, want within %s..%s", side, tt.attempt, tt.base, min, max, lo, hi)
			}
			// 400 draws all in the outer quarter of one side: never, in practice.
			if min > tt.want*9/10 || max < tt.want*11/10 {
				t.Errorf("%s backoff(%d, %s) spans %s..%s, want a spread of ±20%% around %s", side, tt.attempt, tt.base, min, max, tt.want)
			}
		}
		goMin, goMax := lease.Backoff(tt.base, tt.attempt), time.Duration(0)
		for range samples {
			d := lease.Backoff(tt.base, tt.attempt)
			goMin, goMax = min(goMin, d), max(goMax, d)
		}
		check("Go", goMin, goMax)
		var sqlMin, sqlMax time.Duration
		err := p.Pool().QueryRow(context.Background(), `SELECT min(d), max(d)
			FROM (SELECT `+p.Schema()+`.backoff($1, $2) AS d FROM generate_series(1, $3)) s`,
			tt.attempt, tt.base, samples).Scan(&sqlMin, &sqlMax)
		if err != nil {
			t.Fatal(err)
		}
		check("SQL", sqlMin, sqlMax)
	}
}
