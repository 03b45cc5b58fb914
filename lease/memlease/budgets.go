package memlease

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/qd-run/qd/lease"
)

// budget is a budget, its usage reports and the start of the last period
// whose exhaustion was recorded.
type budget struct {
	lease.Budget
	loc       *time.Location
	reports   []usageReport
	toldStart time.Time
	exhausted time.Time
}

type usageReport struct {
	at     time.Time
	amount float64
}

// view is the budget as a listing shows it at now.
func (b *budget) view(now time.Time) lease.Budget {
	out := b.Budget
	out.Agents = slices.Clone(b.Agents)
	out.PeriodStart, out.PeriodEnd = lease.BudgetPeriod(b.Period, b.loc, now)
	out.Spent = b.spent(out.PeriodStart, out.PeriodEnd)
	if b.toldStart.Equal(out.PeriodStart) {
		out.ExhaustedAt = b.exhausted
	}
	return out
}

func (b *budget) spent(start, end time.Time) float64 {
	total := 0.0
	for _, r := range b.reports {
		if !r.at.Before(start) && r.at.Before(end) {
			total += r.amount
		}
	}
	return total
}

// SetBudget creates or changes a budget.
func (p *Provider) SetBudget(ctx context.Context, u lease.BudgetUpdate) (lease.Budget, error) {
	if err := lease.ValidateBudget(u); err != nil {
		return lease.Budget{}, fmt.Errorf("set budget: %w", err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return lease.Budget{}, fmt.Errorf("set budget: %w", err)
	}
	defer p.mu.Unlock()
	b := p.budgets[u.Name]
	if b == nil {
		if u.Max == nil || u.Period == "" {
			return lease.Budget{}, fmt.Errorf("set budget %s: %w: a new budget needs a max and a period", u.Name, lease.ErrInvalid)
		}
		b = &budget{Budget: lease.Budget{Name: u.Name, Timezone: "UTC"}, loc: time.UTC}
		if p.budgets == nil {
			p.budgets = map[string]*budget{}
		}
		p.budgets[u.Name] = b
	}
	if u.Max != nil {
		b.Max = *u.Max
	}
	if u.Period != "" {
		b.Period = u.Period
	}
	if u.Timezone != "" {
		b.Timezone = u.Timezone
		b.loc, _ = time.LoadLocation(u.Timezone) // checked by ValidateBudget
	}
	if u.SetBy != "" {
		b.SetBy = u.SetBy
	}
	b.Agents = slices.Compact(slices.Sorted(slices.Values(append(b.Agents, u.Agents...))))
	return b.view(now), nil
}

// Budgets lists every budget, by name.
func (p *Provider) Budgets(ctx context.Context) ([]lease.Budget, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list budgets: %w", err)
	}
	defer p.mu.Unlock()
	out := []lease.Budget{}
	for _, b := range p.budgets {
		out = append(out, b.view(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RecordUsage adds a run's report to its usage and its budget's period,
// and records the period's exhaustion once.
func (p *Provider) RecordUsage(ctx context.Context, u lease.Usage) (lease.Budget, error) {
	if err := lease.CheckUsage(u.Amount); err != nil {
		return lease.Budget{}, fmt.Errorf("record usage of run %d: %w", u.RunID, err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return lease.Budget{}, fmt.Errorf("record usage: %w", err)
	}
	defer p.mu.Unlock()
	r := p.runs[u.RunID]
	if r == nil {
		return lease.Budget{}, fmt.Errorf("record usage of run %d: %w", u.RunID, lease.ErrNotFound)
	}
	var b *budget
	if u.Budget != "" {
		if b = p.budgets[u.Budget]; b == nil {
			return lease.Budget{}, fmt.Errorf("record usage of run %d: %w: budget %q is not declared", u.RunID,
				lease.ErrNotFound, u.Budget)
		}
	}
	total := u.Amount
	if r.Usage != nil {
		total += *r.Usage
	}
	r.Usage = &total
	if u.Note != "" {
		r.UsageNote = u.Note
	}
	if b == nil {
		return lease.Budget{}, nil
	}
	b.reports = append(b.reports, usageReport{at: now, amount: u.Amount})
	v := b.view(now)
	if v.Exhausted() && !b.toldStart.Equal(v.PeriodStart) {
		b.toldStart, b.exhausted = v.PeriodStart, now
		p.record(r, lease.EventBudgetExhausted, now)
		v.ExhaustedAt = now
	}
	return v, nil
}

// budgetHold says whether cp's budget holds the claim back at now.
func (p *Provider) budgetHold(cp lease.ClaimParams, now time.Time) error {
	if cp.Budget == "" {
		return nil
	}
	b := p.budgets[cp.Budget]
	if b == nil {
		return fmt.Errorf("%w: budget %q is not declared: add a budget block to a daemon's config, or run qd budget set",
			lease.ErrNotFound, cp.Budget)
	}
	v := b.view(now)
	if !v.Exhausted() {
		return nil
	}
	return &lease.HeldError{Budget: b.Name, Spent: v.Spent, Max: v.Max, Until: v.PeriodEnd,
		In: min(v.PeriodEnd.Sub(now), lease.BudgetHoldMax)}
}
