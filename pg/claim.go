package pg

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

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

// Retries of a claim whose outcome is unknown start at claimRetryMin and
// double up to claimRetryMax.
const (
	claimRetryMin = 50 * time.Millisecond
	claimRetryMax = 2 * time.Second
)

// claim runs the claim function under one token. When the outcome of a
// call is unknown (the statement was sent and the connection failed before
// the COMMIT's reply came), it asks again with the same token on a fresh
// connection, which returns the runs the lost call made, if it made any,
// instead of claiming twice. Past the lease's local deadline it gives up,
// and the token goes to the pending list: its runs are given back once the
// database answers.
func (p *Provider) claim(ctx context.Context, cp lease.ClaimParams, n int) ([]*lease.Lease, error) {
	if err := lease.ValidateClaim(&cp); err != nil {
		return nil, fmt.Errorf("claim: %w", err)
	}
	if cp.Token == "" {
		cp.Token = lease.NewClaimToken()
	}
	deadline := time.Now().Add(cp.Lease)
	wait := claimRetryMin
	for tries := 1; ; tries++ {
		out, err := p.claimTx(ctx, cp, n)
		if held := (*lease.HeldError)(nil); errors.As(err, &held) {
			return nil, err // the database's answer: nothing was claimed
		}
		if err == nil {
			if tries > 1 {
				p.logger.Info("claim retried with its token", "claim_token", cp.Token, "tries", tries, "runs", len(out))
			}
			return out, nil
		}
		if tries == 1 && !outcomeUnknown(err) {
			return nil, fmt.Errorf("claim: %w", mapErr(err))
		}
		if outcomeKnown(err) || ctx.Err() != nil || time.Now().Add(wait).After(deadline) {
			return nil, p.abandonClaim(ctx, cp, tries, err)
		}
		p.logger.Warn("claim outcome unknown; asking again with its token", "claim_token", cp.Token, "tries", tries, "error", err)
		if !sleep(ctx, wait) {
			continue // ctx ended: the next try fails at once and pends
		}
		wait = min(2*wait, claimRetryMax)
	}
}

// abandonClaim gives up on a claim whose outcome is unknown: the caller
// will not start what it may have taken, so that is given back at once
// when the database answers (the caller went away, the database did not),
// else later from the pending list.
func (p *Provider) abandonClaim(ctx context.Context, cp lease.ClaimParams, tries int, err error) error {
	bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), giveBackNow)
	runs, gerr := p.giveBack(bctx, cp)
	cancel()
	if gerr == nil {
		if len(runs) > 0 {
			p.logger.Info("gave back the runs of a claim whose outcome was unknown", "claim_token", cp.Token, "runs", runs)
		}
		return fmt.Errorf("claim: outcome unknown after %d tries; what it took (claim token %s, runs %v) was given back: %w",
			tries, cp.Token, runs, mapErr(err))
	}
	p.pend(cp)
	return fmt.Errorf("claim: outcome unknown after %d tries; what it took (claim token %s) is given back once the database answers: %w",
		tries, cp.Token, mapErr(err))
}

// outcomeUnknown reports whether a claim that failed with err may have
// committed: the statement may have reached the server and no answer says
// how it ended.
func outcomeUnknown(err error) bool {
	return !outcomeKnown(err) && !pgconn.SafeToRetry(err)
}

// outcomeKnown reports whether err is the server's own answer (the
// transaction rolled back), or a refusal before anything was sent. A
// terminated backend (57P01) is the server's word too: it aborted the
// transaction. A connection exception (class 08) is not: a pooler sends it
// when its link to the server died ("server conn crashed?"), and it says
// nothing of a COMMIT already on its way.
func outcomeKnown(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return !strings.HasPrefix(pgErr.Code, "08")
	}
	return errors.Is(err, ErrNotMigrated)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// heldBy completes the HeldError of a claim held back by by: a budget when
// spent and max are set (ask again within lease.BudgetHoldMax), else a
// limit.
func heldBy(h *lease.HeldError, by string, spent, max *float64) *lease.HeldError {
	if spent == nil || max == nil {
		h.Limit = by
		return h
	}
	h.Budget, h.Spent, h.Max = by, *spent, *max
	h.In = min(h.In, lease.BudgetHoldMax)
	return h
}

// claimTx is one call of the claim function, in one transaction; of
// claim_limited when the claim names rate limits or a budget.
func (p *Provider) claimTx(ctx context.Context, cp lease.ClaimParams, n int) ([]*lease.Lease, error) {
	var lanes []string
	if len(cp.Lanes) > 0 {
		lanes = cp.Lanes
	}
	var out []*lease.Lease
	var held *lease.HeldError
	var riders []*rider
	limited := len(cp.Limits) > 0 || cp.Budget != ""
	limits := cp.Limits
	if limits == nil {
		limits = []string{}
	}
	p.lastClaim.Store(time.Now().UnixNano())
	err := p.inTx(ctx, func(b *pgx.Batch) {
		riders = p.takeRiders(b)
		// Whether each task waited for others rides along, so that a start
		// reads parents' results only for the tasks that have any.
		scan := func(rows pgx.Rows) error {
			out, held = out[:0], nil
			for rows.Next() {
				l := &lease.Lease{Owner: cp.Owner, ClaimToken: cp.Token}
				var payload string
				dest := []any{&l.TaskID, &l.RunID, &l.Lane, &l.Agent, &l.Attempt, &l.MaxAttempts,
					&l.Priority, &payload, &l.LeaseExpiresAt, &l.RunAfter, &l.Waited}
				var h lease.HeldError
				var by string
				var spent, max *float64
				if limited {
					dest = append(dest, &by, &h.Until, &h.In, &spent, &max)
				}
				if err := rows.Scan(dest...); err != nil {
					return err
				}
				if by != "" {
					held = heldBy(&h, by, spent, max)
					continue
				}
				l.Payload = []byte(payload)
				out = append(out, l)
			}
			return rows.Err()
		}
		if !limited {
			b.Queue(p.sql(`SELECT c.task_id, c.run_id, c.lane, c.agent, c.attempt, c.max_attempts, c.priority, c.payload,
				c.lease_expires_at, c.run_after,
				EXISTS (SELECT FROM {{schema}}.task_deps d WHERE d.task_id = c.task_id)
			FROM {{schema}}.claim($1, $2, $3, $4, $5, $6, $7) c`),
				lanes, nullString(cp.Agent), cp.Owner, cp.Instance, cp.Lease, n, cp.Token).Query(scan)
			return
		}
		b.Queue(p.sql(`SELECT coalesce(c.task_id, 0), coalesce(c.run_id, 0), coalesce(c.lane, ''), coalesce(c.agent, ''),
				coalesce(c.attempt, 0), coalesce(c.max_attempts, 0), coalesce(c.priority, 0), coalesce(c.payload, ''),
				coalesce(c.lease_expires_at, clock_timestamp()), coalesce(c.run_after, clock_timestamp()),
				EXISTS (SELECT FROM {{schema}}.task_deps d WHERE d.task_id = c.task_id),
				coalesce(c.held_by, ''), coalesce(c.held_until, clock_timestamp()), coalesce(c.held_for, '0'),
				c.held_spent::float8, c.held_max::float8
			FROM {{schema}}.claim_limited($8, $9, $1, $2, $3, $4, $5, $6, $7) c`),
			lanes, nullString(cp.Agent), cp.Owner, cp.Instance, cp.Lease, n, cp.Token, limits, nullString(cp.Budget)).
			Query(scan)
	})
	deliver(riders, err)
	if err != nil {
		return nil, err
	}
	if held != nil {
		return nil, held
	}
	if out == nil {
		out = []*lease.Lease{}
	}
	return out, nil
}
