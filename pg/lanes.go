package pg

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// LaneKey is the second key of a lane's advisory lock: the first 32 bits of
// the MD5 of its name as a signed integer. It equals the SQL function
// lane_key(name), and must never change: daemons of different versions
// exclude each other only while they agree on it.
func LaneKey(name string) int32 {
	sum := md5.Sum([]byte(name))
	return int32(binary.BigEndian.Uint32(sum[:4]))
}

// SetLane creates or changes a lane.
func (p *Provider) SetLane(ctx context.Context, u lease.LaneUpdate) (lease.Lane, error) {
	return p.setLane(ctx, p.inTx, u)
}

func (p *Provider) setLane(ctx context.Context, inTx txFunc, u lease.LaneUpdate) (lease.Lane, error) {
	if !lease.ValidName(u.Name) {
		return lease.Lane{}, fmt.Errorf("set lane: %w: lane %q does not match %s", lease.ErrInvalid, u.Name, lease.LanePattern)
	}
	if u.MaxRunning != nil {
		if err := lease.CheckLaneLimit(*u.MaxRunning); err != nil {
			return lease.Lane{}, fmt.Errorf("set lane %s: %w", u.Name, err)
		}
	}
	l := lease.Lane{Name: u.Name}
	err := inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`
			INSERT INTO {{schema}}.lanes AS l (name, max_running, paused, set_by)
			VALUES ($1, coalesce($2, 1), coalesce($3, false), $4)
			ON CONFLICT (name) DO UPDATE SET
				max_running = coalesce($2, l.max_running),
				paused = coalesce($3, l.paused),
				set_by = coalesce($4, l.set_by),
				updated_at = clock_timestamp()
			RETURNING max_running, paused, coalesce(set_by, '')`), u.Name, u.MaxRunning, u.Paused, nullString(u.SetBy)).
			QueryRow(func(row pgx.Row) error { return row.Scan(&l.MaxRunning, &l.Paused, &l.SetBy) })
	})
	if err != nil {
		return lease.Lane{}, fmt.Errorf("set lane %s: %w", u.Name, mapErr(err))
	}
	return l, nil
}

// Lanes lists every lane with its running and queued counts.
func (p *Provider) Lanes(ctx context.Context) ([]lease.Lane, error) {
	rows, err := p.query(ctx, p.sql(`
		SELECT l.name, l.max_running, l.paused, coalesce(l.set_by, ''),
			(SELECT count(*) FROM {{schema}}.runs r WHERE r.lane = l.name AND r.state = 'running'),
			q.n, q.oldest
		FROM {{schema}}.lanes l
		CROSS JOIN LATERAL (
			SELECT count(*) AS n, min(t.created_at) AS oldest
			FROM {{schema}}.tasks t WHERE t.lane = l.name AND t.state = 'queued') q
		ORDER BY l.name`))
	if err != nil {
		return nil, fmt.Errorf("list lanes: %w", mapErr(err))
	}
	lanes, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Lane, error) {
		var l lease.Lane
		var oldest *time.Time
		err := row.Scan(&l.Name, &l.MaxRunning, &l.Paused, &l.SetBy, &l.Running, &l.Queued, &oldest)
		if oldest != nil {
			l.OldestQueued = *oldest
		}
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("list lanes: %w", mapErr(err))
	}
	return lanes, nil
}
