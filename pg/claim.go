package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// Claim takes the best eligible task; see the package doc for the steps.
func (p *Provider) Claim(ctx context.Context, cp lease.ClaimParams) (*lease.Lease, error) {
	ls, err := p.claim(ctx, cp, 1)
	if err != nil {
		return nil, err
	}
	if len(ls) == 0 {
		return nil, fmt.Errorf("claim: %w", lease.ErrNoWork)
	}
	return ls[0], nil
}

// ClaimMany claims up to n tasks, over several lanes, in one transaction.
func (p *Provider) ClaimMany(ctx context.Context, cp lease.ClaimParams, n int) ([]*lease.Lease, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim: %w: count %d is below 1", lease.ErrInvalid, n)
	}
	return p.claim(ctx, cp, n)
}

func (p *Provider) claim(ctx context.Context, cp lease.ClaimParams, n int) ([]*lease.Lease, error) {
	if err := lease.ValidateClaim(&cp); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	var lanes []string
	if len(cp.Lanes) > 0 {
		lanes = cp.Lanes
	}
	var out []*lease.Lease
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT task_id, run_id, lane, agent, attempt, max_attempts, priority, payload, lease_expires_at
			FROM {{schema}}.claim($1, $2, $3, $4, $5, $6)`),
			lanes, nullString(cp.Agent), cp.Owner, cp.Instance, cp.Lease, n).
			Query(func(rows pgx.Rows) error {
				out = out[:0]
				for rows.Next() {
					l := &lease.Lease{Owner: cp.Owner}
					var payload string
					if err := rows.Scan(&l.TaskID, &l.RunID, &l.Lane, &l.Agent, &l.Attempt, &l.MaxAttempts,
						&l.Priority, &payload, &l.LeaseExpiresAt); err != nil {
						return err
					}
					l.Payload = []byte(payload)
					out = append(out, l)
				}
				return rows.Err()
			})
	})
	if err != nil {
		return nil, fmt.Errorf("claim: %w", mapErr(err))
	}
	if out == nil {
		out = []*lease.Lease{}
	}
	return out, nil
}
