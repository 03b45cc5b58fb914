package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/qd-run/qd/lease"
)

// Heartbeat extends the leases of live runs in one statement.
func (p *Provider) Heartbeat(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
	if len(beats) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(beats))
	tokens := make([]*string, len(beats))
	leases := make([]time.Duration, len(beats))
	pids := make([]*int32, len(beats))
	outputs := make([]pgtype.Timestamptz, len(beats))
	for i, b := range beats {
		if b.Lease < 0 {
			return nil, fmt.Errorf("heartbeat run %d: %w: lease %s is negative", b.RunID, lease.ErrInvalid, b.Lease)
		}
		ids[i] = b.RunID
		tokens[i] = nullString(b.ClaimToken)
		leases[i] = b.Lease
		if leases[i] == 0 {
			leases[i] = lease.DefaultLease
		}
		if b.PID != 0 {
			pid := int32(b.PID)
			pids[i] = &pid
		}
		if !b.LastOutputAt.IsZero() {
			outputs[i] = pgtype.Timestamptz{Time: b.LastOutputAt, Valid: true}
		}
	}
	type beaten struct {
		expires time.Time
		cancel  bool
	}
	got := make(map[int64]beaten, len(beats))
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT run_id, lease_expires_at, cancel_requested FROM {{schema}}.heartbeat($1, $2, $3, $4, $5)`),
			ids, leases, pids, outputs, tokens).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var id int64
					var r beaten
					if err := rows.Scan(&id, &r.expires, &r.cancel); err != nil {
						return err
					}
					got[id] = r
				}
				return rows.Err()
			})
	})
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", mapErr(err))
	}
	res := make([]lease.BeatResult, len(beats))
	for i, b := range beats {
		res[i].RunID = b.RunID
		r, ok := got[b.RunID]
		if !ok {
			res[i].Err = fmt.Errorf("heartbeat run %d: %w", b.RunID, lease.ErrLeaseLost)
			continue
		}
		res[i].LeaseExpiresAt, res[i].CancelRequested = r.expires, r.cancel
	}
	return res, nil
}
