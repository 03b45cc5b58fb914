package memlease

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/qd-run/qd/lease"
)

// rateLimit is a rate limit and its theoretical arrival time (GCRA, as pg
// keeps it: see lease.Limit).
type rateLimit struct {
	lease.Limit
	emission time.Duration
	tat      time.Time
}

// view is the limit as a listing shows it at now.
func (l *rateLimit) view(now time.Time) lease.Limit {
	out := l.Limit
	out.Agents = slices.Clone(l.Agents)
	out.Available, out.NextUnitAt = lease.LimitUnits(l.tat, now, l.emission, l.Burst)
	return out
}

// take moves the arrival time on by n units from now or from where it
// was, whichever is later.
func (l *rateLimit) take(now time.Time, n int64) {
	l.tat = maxTime(l.tat, now).Add(time.Duration(n) * l.emission)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SetLimit creates or changes a rate limit.
func (p *Provider) SetLimit(ctx context.Context, u lease.LimitUpdate) (lease.Limit, error) {
	if err := lease.ValidateLimit(u); err != nil {
		return lease.Limit{}, fmt.Errorf("set limit: %w", err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return lease.Limit{}, fmt.Errorf("set limit: %w", err)
	}
	defer p.mu.Unlock()
	if p.limits == nil {
		p.limits = map[string]*rateLimit{}
	}
	l := p.limits[u.Name]
	if l == nil {
		l = &rateLimit{Limit: lease.Limit{Name: u.Name}}
		p.limits[u.Name] = l
	}
	l.Rate, l.Per, l.emission = u.Rate, u.Per, lease.Emission(u.Rate, u.Per)
	if u.Burst != nil {
		l.Burst = *u.Burst
	}
	if u.SetBy != "" {
		l.SetBy = u.SetBy
	}
	l.Agents = slices.Compact(slices.Sorted(slices.Values(append(l.Agents, u.Agents...))))
	return l.view(now), nil
}

// Limits lists every rate limit, by name.
func (p *Provider) Limits(ctx context.Context) ([]lease.Limit, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list limits: %w", err)
	}
	defer p.mu.Unlock()
	out := []lease.Limit{}
	for _, l := range p.limits {
		out = append(out, l.view(now))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Spend takes units of limit name after the fact; the limit may owe units.
func (p *Provider) Spend(ctx context.Context, name string, units int64) (lease.Limit, error) {
	if err := lease.CheckSpend(name, units); err != nil {
		return lease.Limit{}, fmt.Errorf("spend: %w", err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return lease.Limit{}, fmt.Errorf("spend: %w", err)
	}
	defer p.mu.Unlock()
	l := p.limits[name]
	if l == nil {
		return lease.Limit{}, fmt.Errorf("spend %d units of limit %s: %w: limit %q is not declared", units, name,
			lease.ErrNotFound, name)
	}
	l.take(now, units)
	return l.view(now), nil
}

// units says how many runs a claim of cp may make at now: at most n, and
// no more than the scarcest of its limits has. A limit with none holds
// the claim back.
func (p *Provider) units(cp lease.ClaimParams, n int, now time.Time) (int, error) {
	for _, name := range cp.Limits {
		l := p.limits[name]
		if l == nil {
			return 0, fmt.Errorf("%w: limit %q is not declared: add a limit block to a daemon's config, or run qd limit set",
				lease.ErrNotFound, name)
		}
		units, _ := lease.LimitUnits(l.tat, now, l.emission, l.Burst)
		if units < 1 {
			due := l.tat.Add(-time.Duration(l.Burst) * l.emission)
			return 0, &lease.HeldError{Limit: name, Until: due, In: due.Sub(now)}
		}
		n = min(n, units)
	}
	return n, nil
}
