package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// leaseLag follows the renewals of every live run's lease in the runs
// table: each new last_heartbeat_at is a renewal, and one later than a
// heartbeat interval after the run's previous one is late by the
// difference. Both times are the database's clock.
type leaseLag struct {
	heartbeat time.Duration
	last      map[int64]time.Time
	lags      []time.Duration
	leastLeft time.Duration
}

// sample reads the runs every quarter interval until ctx ends.
func (l *leaseLag) sample(ctx context.Context, db *database) error {
	l.last = map[int64]time.Time{}
	l.leastLeft = -1
	for {
		if err := l.read(ctx, db); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if sleepCtx(ctx, l.heartbeat/4) != nil {
			return nil
		}
	}
}

func (l *leaseLag) read(ctx context.Context, db *database) error {
	rows, err := db.queue.Pool().Query(ctx, db.sql(`SELECT id, last_heartbeat_at, lease_expires_at - clock_timestamp()
		FROM {s}.runs WHERE state = 'running'`))
	if err != nil {
		return fmt.Errorf("read the live runs' leases: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var at time.Time
		var left time.Duration
		if err := rows.Scan(&id, &at, &left); err != nil {
			return fmt.Errorf("read the live runs' leases: %w", err)
		}
		if l.leastLeft < 0 || left < l.leastLeft {
			l.leastLeft = left
		}
		if prev, ok := l.last[id]; ok && at.After(prev) {
			l.lags = append(l.lags, max(0, at.Sub(prev)-l.heartbeat))
		}
		l.last[id] = at
	}
	return rows.Err()
}

// result is the worst and the p99 lag, the renewals seen and the least
// lease left seen.
func (l *leaseLag) result() (worst, p99 time.Duration, n int, least time.Duration) {
	slices.Sort(l.lags)
	if len(l.lags) > 0 {
		worst = l.lags[len(l.lags)-1]
	}
	return worst, percentile(l.lags, 0.99), len(l.lags), l.leastLeft
}
