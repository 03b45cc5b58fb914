package memlease

import (
	"context"
	"fmt"
	"sort"

	"github.com/qd-run/qd/lease"
)

// PauseAgent stops claims of the agent's tasks.
func (p *Provider) PauseAgent(ctx context.Context, agent, setBy string) (lease.AgentPause, error) {
	if !lease.ValidName(agent) {
		return lease.AgentPause{}, fmt.Errorf("pause agent: %w: agent %q does not match %s", lease.ErrInvalid, agent, lease.LanePattern)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return lease.AgentPause{}, fmt.Errorf("pause agent %s: %w", agent, err)
	}
	defer p.mu.Unlock()
	if a, ok := p.paused[agent]; ok {
		return a, nil
	}
	a := lease.AgentPause{Agent: agent, At: now, SetBy: setBy}
	p.paused[agent] = a
	return a, nil
}

// ResumeAgent lets the agent's tasks be claimed again.
func (p *Provider) ResumeAgent(ctx context.Context, agent string) error {
	if !lease.ValidName(agent) {
		return fmt.Errorf("resume agent: %w: agent %q does not match %s", lease.ErrInvalid, agent, lease.LanePattern)
	}
	if _, err := p.lock(ctx); err != nil {
		return fmt.Errorf("resume agent %s: %w", agent, err)
	}
	defer p.mu.Unlock()
	delete(p.paused, agent)
	return nil
}

// PausedAgents lists the paused agents by name.
func (p *Provider) PausedAgents(ctx context.Context) ([]lease.AgentPause, error) {
	if _, err := p.lock(ctx); err != nil {
		return nil, fmt.Errorf("list paused agents: %w", err)
	}
	defer p.mu.Unlock()
	out := make([]lease.AgentPause, 0, len(p.paused))
	for _, a := range p.paused {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Agent < out[j].Agent })
	return out, nil
}
