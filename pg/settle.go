package pg

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// settlement is one row of the SQL type settlement, sent as an element of
// a JSON array that jsonb_populate_recordset reads by field name (see the
// package doc, "Settlements"). A nil field is NULL.
type settlement struct {
	RunID      int64     `json:"run_id"`
	ClaimToken *string   `json:"claim_token,omitempty"`
	Outcome    string    `json:"outcome"`
	Summary    string    `json:"summary"`
	ExitCode   *int      `json:"exit_code,omitempty"`
	Signal     *string   `json:"signal,omitempty"`
	OutputTail *string   `json:"output_tail,omitempty"`
	RetryIn    *interval `json:"retry_in,omitempty"`
	Refund     bool      `json:"refund"`
	CPUUsec    *int64    `json:"cpu_usec,omitempty"`
	MemoryPeak *int64    `json:"memory_peak,omitempty"`
	LogError   *string   `json:"log_error,omitempty"`
	Event      *string   `json:"event,omitempty"`
	Result     *string   `json:"result,omitempty"`
}

// interval is a duration written as PostgreSQL reads an interval.
type interval time.Duration

func (d interval) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, `"%d microseconds"`, time.Duration(d).Microseconds()), nil
}

// settlementOf is s as a row of settle_runs.
func settlementOf(s lease.Settlement) settlement {
	r := settlement{
		RunID: s.RunID, ClaimToken: nullString(s.ClaimToken), Outcome: string(s.Outcome), Summary: s.Summary,
		ExitCode: s.ExitCode, Signal: nullString(s.Signal), OutputTail: nullString(s.OutputTail), Refund: s.Refund,
		MemoryPeak: s.MemoryPeak, LogError: nullString(s.LogError), Event: nullString(s.Event),
	}
	if s.Outcome == lease.RunCompleted && s.Result != nil {
		res := string(s.Result)
		r.Result = &res
	}
	if s.RetryIn > 0 {
		d := interval(s.RetryIn)
		r.RetryIn = &d
	}
	if s.CPUTime != nil {
		us := s.CPUTime.Microseconds()
		r.CPUUsec = &us
	}
	return r
}

// deferralCaps is the JSON array of defer_runs: the run and max_deferrals
// of each settlement that defers its task, "" when none does (and
// settle_runs is called alone).
func deferralCaps(ss []lease.Settlement, idx []int) string {
	type capRow struct {
		RunID int64 `json:"run_id"`
		Max   int   `json:"max"`
	}
	var caps []capRow
	for _, i := range idx {
		if ss[i].Deferred {
			caps = append(caps, capRow{ss[i].RunID, ss[i].MaxDeferrals})
		}
	}
	if len(caps) == 0 {
		return ""
	}
	b, _ := json.Marshal(caps)
	return string(b)
}

// Settle ends runs in one transaction, each fenced on its own.
func (p *Provider) Settle(ctx context.Context, ss ...lease.Settlement) ([]error, error) {
	errs := make([]error, len(ss))
	var idx []int
	var rows []settlement
	for i, s := range ss {
		if err := lease.ValidateSettlement(s); err != nil {
			errs[i] = fmt.Errorf("settle run %d: %w", s.RunID, err)
			continue
		}
		idx = append(idx, i)
		rows = append(rows, settlementOf(s))
	}
	if len(rows) == 0 {
		return errs, nil
	}
	doc, err := json.Marshal(rows)
	if err != nil {
		return nil, fmt.Errorf("settle: encode settlements: %w", err)
	}
	status := make(map[int64]string, len(rows))
	query, args := `SELECT run_id, status FROM {{schema}}.settle_runs(ARRAY(
				SELECT jsonb_populate_record(NULL::{{schema}}.settlement, e.value)
				FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY e ORDER BY e.ordinality))`, []any{string(doc)}
	if caps := deferralCaps(ss, idx); caps != "" {
		query, args = `SELECT run_id, status FROM {{schema}}.settle_runs({{schema}}.defer_runs(ARRAY(
				SELECT jsonb_populate_record(NULL::{{schema}}.settlement, e.value)
				FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY e ORDER BY e.ordinality), $2::jsonb))`,
			[]any{string(doc), caps}
	}
	err = p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(query), args...).
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
