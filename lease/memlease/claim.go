package memlease

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/qd-run/qd/lease"
)

// Claim reaps the expired runs of the lanes it covers and takes the best
// eligible task. It returns lease.ErrNoWork when nothing is eligible.
func (p *Provider) Claim(ctx context.Context, cp lease.ClaimParams) (*lease.Lease, error) {
	got, err := p.claim(ctx, cp, 1)
	if err != nil {
		return nil, err
	}
	if len(got) == 0 {
		return nil, fmt.Errorf("claim task: %w", lease.ErrNoWork)
	}
	return got[0], nil
}

// ClaimMany claims up to n tasks at once, never taking a lane past its limit.
func (p *Provider) ClaimMany(ctx context.Context, cp lease.ClaimParams, n int) ([]*lease.Lease, error) {
	if n < 1 {
		return nil, fmt.Errorf("claim tasks: %w: count %d is less than 1", lease.ErrInvalid, n)
	}
	return p.claim(ctx, cp, n)
}

func (p *Provider) claim(ctx context.Context, cp lease.ClaimParams, n int) ([]*lease.Lease, error) {
	if err := lease.ValidateClaim(&cp); err != nil {
		return nil, fmt.Errorf("claim task: %w", err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("claim task: %w", err)
	}
	defer p.mu.Unlock()
	if made, ok := p.claimed(cp, now); ok {
		return made, nil
	}
	if err := p.budgetHold(cp, now); err != nil {
		return nil, fmt.Errorf("claim task: %w", err)
	}
	n, err = p.units(cp, n, now)
	if err != nil {
		return nil, fmt.Errorf("claim task: %w", err)
	}
	covers := func(lane string) bool { return len(cp.Lanes) == 0 || slices.Contains(cp.Lanes, lane) }
	p.reap(covers, now)
	running := map[string]int{}
	for _, r := range p.live {
		running[r.Lane]++
	}
	out := []*lease.Lease{}
	for _, t := range p.eligible(cp.Agent, covers, now) {
		if len(out) == n {
			break
		}
		if running[t.Lane] >= p.lanes[t.Lane].MaxRunning {
			continue
		}
		running[t.Lane]++
		out = append(out, p.start(t, cp, now))
	}
	for _, name := range cp.Limits {
		p.limits[name].take(now, int64(len(out)))
	}
	if cp.Token != "" {
		if p.tokens == nil {
			p.tokens = map[string][]int64{}
		}
		for _, l := range out {
			p.tokens[cp.Token] = append(p.tokens[cp.Token], l.RunID)
		}
	}
	return out, nil
}

// claimed answers a claim whose token already made runs: those still live
// and held by its owner, in claim order, and true. It returns false when
// the token made none, and the claim goes ahead.
func (p *Provider) claimed(cp lease.ClaimParams, now time.Time) ([]*lease.Lease, bool) {
	var made []*lease.Run
	for _, id := range p.tokens[cp.Token] {
		if r, ok := p.runs[id]; ok {
			made = append(made, r)
		}
	}
	if cp.Token == "" || len(made) == 0 {
		return nil, false
	}
	out := []*lease.Lease{}
	for _, r := range made {
		if r.State == lease.RunRunning && r.Owner == cp.Owner && now.Before(r.LeaseExpiresAt) {
			out = append(out, leaseOf(p.tasks[r.TaskID], r))
		}
	}
	return out, true
}

// reap abandons the expired runs of the covered lanes.
func (p *Provider) reap(covers func(string) bool, now time.Time) {
	for _, r := range p.live {
		if covers(r.Lane) && !now.Before(r.LeaseExpiresAt) {
			silent := now.Sub(r.LastHeartbeatAt)
			p.end(r, lease.Settlement{Outcome: lease.RunAbandoned, Summary: lease.SilenceSummary(silent)}, now)
		}
	}
}

// eligible returns the claimable tasks in claim order: lowest priority
// number, then oldest run_after, then lowest id.
func (p *Provider) eligible(agent string, covers func(string) bool, now time.Time) []*lease.Task {
	var ts []*lease.Task
	for _, t := range p.tasks {
		l := p.lanes[t.Lane]
		_, paused := p.paused[t.Agent]
		if t.State != lease.TaskQueued || l.Paused || paused || !covers(t.Lane) ||
			(agent != "" && t.Agent != agent) || t.RunAfter.After(now) {
			continue
		}
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		a, b := ts[i], ts[j]
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if !a.RunAfter.Equal(b.RunAfter) {
			return a.RunAfter.Before(b.RunAfter)
		}
		return a.ID < b.ID
	})
	return ts
}

// start marks t running, counts the attempt and inserts its run.
func (p *Provider) start(t *lease.Task, cp lease.ClaimParams, now time.Time) *lease.Lease {
	t.State = lease.TaskRunning
	t.Attempts++
	t.UpdatedAt = now
	p.lastRun++
	r := &lease.Run{
		ID:              p.lastRun,
		TaskID:          t.ID,
		Lane:            t.Lane,
		Agent:           t.Agent,
		Attempt:         t.Attempts,
		Owner:           cp.Owner,
		Instance:        cp.Instance,
		State:           lease.RunRunning,
		StartedAt:       now,
		LastHeartbeatAt: now,
		LeaseExpiresAt:  now.Add(cp.Lease),
	}
	p.runs[r.ID] = r
	p.live[r.ID] = r
	return leaseOf(t, r)
}

// leaseOf is the lease that run r of task t hands out.
func leaseOf(t *lease.Task, r *lease.Run) *lease.Lease {
	return &lease.Lease{
		TaskID:         t.ID,
		RunID:          r.ID,
		Lane:           t.Lane,
		Agent:          r.Agent,
		Attempt:        r.Attempt,
		MaxAttempts:    t.MaxAttempts,
		Priority:       t.Priority,
		Payload:        append([]byte(nil), t.Payload...),
		LeaseExpiresAt: r.LeaseExpiresAt,
		Owner:          r.Owner,
		RunAfter:       t.RunAfter,
		Waited:         len(t.After) > 0,
	}
}
