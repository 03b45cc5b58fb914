package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

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
		cpus      []*int64
		peaks     []*int64
		tokens    []*string
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
		var cpu *int64
		if s.CPUTime != nil {
			us := s.CPUTime.Microseconds()
			cpu = &us
		}
		cpus, peaks = append(cpus, cpu), append(peaks, s.MemoryPeak)
		tokens = append(tokens, nullString(s.ClaimToken))
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
	var evIDs []int64
	var evNames, evOutcomes []string
	var evTokens []*string
	for _, i := range idx {
		if e := ss[i].Event; e != "" {
			evIDs, evNames = append(evIDs, ss[i].RunID), append(evNames, e)
			evOutcomes, evTokens = append(evOutcomes, string(ss[i].Outcome)), append(evTokens, nullString(ss[i].ClaimToken))
		}
	}
	status := make(map[int64]string, len(ids))
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT run_id, status FROM {{schema}}.settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`),
			ids, outcomes, summaries, exits, signals, tails, retries, refunds, cpus, peaks, tokens).
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
		if len(evIDs) > 0 {
			// The outbox event of each run that now has the outcome
			// settled here (a timeout, a stall), once.
			b.Queue(p.sql(`INSERT INTO {{schema}}.events (task_id, run_id, event, agent)
				SELECT r.task_id, r.id, x.e, r.agent
				FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[]) AS x(id, e, outcome, token)
				JOIN {{schema}}.runs r ON r.id = x.id AND r.state = x.outcome
				WHERE x.token IS NULL OR r.claim_token IS NOT DISTINCT FROM x.token
				ON CONFLICT (run_id, event) DO NOTHING`), evIDs, evNames, evOutcomes, evTokens)
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
