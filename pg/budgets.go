package pg

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qd-run/qd/lease"
)

// budgetColumns are what scanBudget reads: the budget and its current
// period, by the database's clock.
const budgetColumns = `b.name, b.max::float8, b.period, b.timezone, coalesce(b.set_by, ''), b.agents,
	{{schema}}.budget_spent(b.name, p.start, p.next)::float8, p.start, p.next,
	CASE WHEN b.told_start = p.start THEN b.exhausted_at END`

// budgetFrom is the FROM clause of budgetColumns.
const budgetFrom = ` FROM {{schema}}.budgets b
	CROSS JOIN LATERAL {{schema}}.budget_period(b.period, b.timezone, clock_timestamp()) p`

func scanBudget(row pgx.Row) (lease.Budget, error) {
	var b lease.Budget
	var exhausted *time.Time
	err := row.Scan(&b.Name, &b.Max, &b.Period, &b.Timezone, &b.SetBy, &b.Agents, &b.Spent, &b.PeriodStart,
		&b.PeriodEnd, &exhausted)
	if exhausted != nil {
		b.ExhaustedAt = *exhausted
	}
	return b, err
}

// SetBudget creates or changes a budget.
func (p *Provider) SetBudget(ctx context.Context, u lease.BudgetUpdate) (lease.Budget, error) {
	if err := lease.ValidateBudget(u); err != nil {
		return lease.Budget{}, fmt.Errorf("set budget: %w", err)
	}
	agents := u.Agents
	if agents == nil {
		agents = []string{}
	}
	var b lease.Budget
	err := p.inTx(ctx, func(bt *pgx.Batch) {
		bt.Queue(p.sql(`
			INSERT INTO {{schema}}.budgets AS b (name, max, period, timezone, agents, set_by)
			VALUES ($1, coalesce($2::float8, (SELECT o.max FROM {{schema}}.budgets o WHERE o.name = $1)),
				coalesce($3::text, (SELECT o.period FROM {{schema}}.budgets o WHERE o.name = $1)), coalesce($4, 'UTC'), $5, $6)
			ON CONFLICT (name) DO UPDATE SET
				max = coalesce($2, b.max), period = coalesce($3, b.period), timezone = coalesce($4, b.timezone),
				agents = ARRAY(SELECT DISTINCT a FROM unnest(b.agents || $5::text[]) a ORDER BY a),
				set_by = coalesce($6, b.set_by), updated_at = clock_timestamp()`),
			u.Name, u.Max, nullString(u.Period), nullString(u.Timezone), agents, nullString(u.SetBy))
		bt.Queue(p.sql(`SELECT `+budgetColumns+budgetFrom+` WHERE b.name = $1`), u.Name).
			QueryRow(func(row pgx.Row) (err error) { b, err = scanBudget(row); return err })
	})
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23502" { // not null: a new budget without max or period
		return lease.Budget{}, fmt.Errorf("set budget %s: %w: there is no budget %s, and a new budget needs a max and a period",
			u.Name, lease.ErrInvalid, u.Name)
	}
	if err != nil {
		return lease.Budget{}, fmt.Errorf("set budget %s: %w", u.Name, mapErr(err))
	}
	return b, nil
}

// Budgets lists every budget with its current period's usage, by name.
func (p *Provider) Budgets(ctx context.Context) ([]lease.Budget, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+budgetColumns+budgetFrom+` ORDER BY b.name`))
	if err != nil {
		return nil, fmt.Errorf("list budgets: %w", mapErr(err))
	}
	bs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Budget, error) { return scanBudget(row) })
	if err != nil {
		return nil, fmt.Errorf("list budgets: %w", mapErr(err))
	}
	return bs, nil
}

// RecordUsage adds a run's report to its usage and its budget's period
// (SQL record_usage).
func (p *Provider) RecordUsage(ctx context.Context, u lease.Usage) (lease.Budget, error) {
	if err := lease.CheckUsage(u.Amount); err != nil {
		return lease.Budget{}, fmt.Errorf("record usage of run %d: %w", u.RunID, err)
	}
	var b lease.Budget
	err := p.inTx(ctx, func(bt *pgx.Batch) {
		bt.Queue(p.sql(`SELECT {{schema}}.record_usage($1, $2, $3, $4)`), u.RunID, nullString(u.Budget), u.Amount,
			nullString(u.Note))
		if u.Budget != "" {
			bt.Queue(p.sql(`SELECT `+budgetColumns+budgetFrom+` WHERE b.name = $1`), u.Budget).
				QueryRow(func(row pgx.Row) (err error) { b, err = scanBudget(row); return err })
		}
	})
	if err != nil {
		return lease.Budget{}, fmt.Errorf("record usage of run %d: %w", u.RunID, mapErr(err))
	}
	return b, nil
}
