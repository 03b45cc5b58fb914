package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// SetLimit creates or changes a rate limit; its theoretical arrival time
// stays, so a change of rate applies from the next unit on.
func (p *Provider) SetLimit(ctx context.Context, u lease.LimitUpdate) (lease.Limit, error) {
	if err := lease.ValidateLimit(u); err != nil {
		return lease.Limit{}, fmt.Errorf("set limit: %w", err)
	}
	agents := u.Agents
	if agents == nil {
		agents = []string{}
	}
	var l lease.Limit
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`
			INSERT INTO {{schema}}.limits AS l (name, rate, per, emission, burst, agents, set_by)
			VALUES ($1, $2, $3, $4, coalesce($5, 0), $6, $7)
			ON CONFLICT (name) DO UPDATE SET
				rate = $2, per = $3, emission = $4,
				burst = coalesce($5, l.burst),
				agents = ARRAY(SELECT DISTINCT a FROM unnest(l.agents || $6::text[]) a ORDER BY a),
				set_by = coalesce($7, l.set_by),
				updated_at = clock_timestamp()
			RETURNING `+limitColumns), u.Name, u.Rate, u.Per, lease.Emission(u.Rate, u.Per), u.Burst, agents,
			nullString(u.SetBy)).
			QueryRow(func(row pgx.Row) (err error) { l, err = scanLimit(row); return err })
	})
	if err != nil {
		return lease.Limit{}, fmt.Errorf("set limit %s: %w", u.Name, mapErr(err))
	}
	return l, nil
}

// limitColumns are what scanLimit reads, the limit's units computed in Go
// from its arrival time and the database's clock.
const limitColumns = `l.name, l.rate, l.per, l.burst, coalesce(l.set_by, ''), l.agents,
	l.emission, greatest(l.tat, clock_timestamp()), clock_timestamp()`

func scanLimit(row pgx.Row) (lease.Limit, error) {
	var l lease.Limit
	var emission time.Duration
	var tat, now time.Time
	if err := row.Scan(&l.Name, &l.Rate, &l.Per, &l.Burst, &l.SetBy, &l.Agents, &emission, &tat, &now); err != nil {
		return l, err
	}
	l.Available, l.NextUnitAt = lease.LimitUnits(tat, now, emission, l.Burst)
	return l, nil
}

// Limits lists every rate limit, by name.
func (p *Provider) Limits(ctx context.Context) ([]lease.Limit, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+limitColumns+` FROM {{schema}}.limits l ORDER BY l.name`))
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", mapErr(err))
	}
	ls, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Limit, error) { return scanLimit(row) })
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", mapErr(err))
	}
	return ls, nil
}

// Spend takes units of limit name after the fact: its theoretical
// arrival time moves on by units emissions from now or from where it
// was, whichever is later, so the limit may owe units.
func (p *Provider) Spend(ctx context.Context, name string, units int64) (lease.Limit, error) {
	if err := lease.CheckSpend(name, units); err != nil {
		return lease.Limit{}, fmt.Errorf("spend: %w", err)
	}
	var l lease.Limit
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`UPDATE {{schema}}.limits AS l SET tat = greatest(l.tat, clock_timestamp()) + $2 * l.emission
			WHERE l.name = $1 RETURNING `+limitColumns), name, units).
			QueryRow(func(row pgx.Row) (err error) { l, err = scanLimit(row); return err })
	})
	if err != nil {
		return lease.Limit{}, fmt.Errorf("spend %d units of limit %s: %w", units, name, mapErr(err))
	}
	return l, nil
}
