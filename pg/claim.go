package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

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

// Heartbeat extends the leases of live runs in one statement.
func (p *Provider) Heartbeat(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
	if len(beats) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(beats))
	leases := make([]time.Duration, len(beats))
	pids := make([]*int32, len(beats))
	outputs := make([]pgtype.Timestamptz, len(beats))
	for i, b := range beats {
		if b.Lease < 0 {
			return nil, fmt.Errorf("heartbeat run %d: %w: lease %s is negative", b.RunID, lease.ErrInvalid, b.Lease)
		}
		ids[i] = b.RunID
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
		b.Queue(p.sql(`SELECT run_id, lease_expires_at, cancel_requested FROM {{schema}}.heartbeat($1, $2, $3, $4)`),
			ids, leases, pids, outputs).
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

// Settle ends runs in one transaction, each fenced on its own.
func (p *Provider) Settle(ctx context.Context, ss ...lease.Settlement) ([]error, error) {
	errs := make([]error, len(ss))
	var (
		idx       []int
		ids       []int64
		outcomes  []string
		summaries []string
		exits     []*int32
		signals   []*string
		tails     []*string
		retries   []*time.Duration
		refunds   []bool
	)
	for i, s := range ss {
		if err := lease.ValidateSettlement(s); err != nil {
			errs[i] = fmt.Errorf("settle run %d: %w", s.RunID, err)
			continue
		}
		idx = append(idx, i)
		ids = append(ids, s.RunID)
		outcomes = append(outcomes, string(s.Outcome))
		summaries = append(summaries, s.Summary)
		var exit *int32
		if s.ExitCode != nil {
			e := int32(*s.ExitCode)
			exit = &e
		}
		exits = append(exits, exit)
		signals = append(signals, nullString(s.Signal))
		tails = append(tails, nullString(s.OutputTail))
		var retry *time.Duration
		if s.RetryIn > 0 {
			retry = &s.RetryIn
		}
		retries = append(retries, retry)
		refunds = append(refunds, s.Refund)
	}
	if len(ids) == 0 {
		return errs, nil
	}
	var logIDs []int64
	var logErrs, logOutcomes []string
	for _, i := range idx {
		if e := ss[i].LogError; e != "" {
			logIDs, logErrs, logOutcomes = append(logIDs, ss[i].RunID), append(logErrs, e), append(logOutcomes, string(ss[i].Outcome))
		}
	}
	status := make(map[int64]string, len(ids))
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT run_id, status FROM {{schema}}.settle($1, $2, $3, $4, $5, $6, $7, $8)`),
			ids, outcomes, summaries, exits, signals, tails, retries, refunds).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var id int64
					var st string
					if err := rows.Scan(&id, &st); err != nil {
						return err
					}
					if prev, ok := status[id]; !ok || prev == "ok" {
						status[id] = st
					}
				}
				return rows.Err()
			})
		if len(logIDs) > 0 {
			// Marks only the runs that now have the outcome settled here.
			b.Queue(p.sql(`UPDATE {{schema}}.runs r SET log_error = x.e
				FROM unnest($1::bigint[], $2::text[], $3::text[]) AS x(id, e, outcome)
				WHERE r.id = x.id AND r.state = x.outcome`), logIDs, logErrs, logOutcomes)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("settle: %w", mapErr(err))
	}
	for _, i := range idx {
		id := ss[i].RunID
		switch status[id] {
		case "ok", "same":
		case "missing":
			errs[i] = fmt.Errorf("settle run %d: %w", id, lease.ErrNotFound)
		default:
			errs[i] = fmt.Errorf("settle run %d: %w", id, lease.ErrLeaseLost)
		}
	}
	return errs, nil
}

// AbandonOwner abandons the running runs of owner held by one of instances.
func (p *Provider) AbandonOwner(ctx context.Context, owner string, instances []string, summary string) ([]int64, error) {
	if owner == "" {
		return nil, fmt.Errorf("abandon runs: %w: owner is empty", lease.ErrInvalid)
	}
	ids := []int64{}
	if len(instances) == 0 {
		return ids, nil
	}
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT * FROM {{schema}}.abandon_owner($1, $2, $3)`), owner, instances, summary).
			Query(func(rows pgx.Rows) error {
				var err error
				ids, err = pgx.AppendRows(ids, rows, pgx.RowTo[int64])
				return err
			})
	})
	if err != nil {
		return nil, fmt.Errorf("abandon runs of %s: %w", owner, mapErr(err))
	}
	return ids, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
