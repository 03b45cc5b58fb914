package pg

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// PauseAgent records the agent in agent_pauses: claim then takes none of
// its tasks.
func (p *Provider) PauseAgent(ctx context.Context, agent, setBy string) (lease.AgentPause, error) {
	return p.pauseAgent(ctx, p.inTx, agent, setBy)
}

// ResumeAgent removes the agent's pause.
func (p *Provider) ResumeAgent(ctx context.Context, agent string) error {
	return p.resumeAgent(ctx, p.inTx, agent)
}

// PausedAgents lists agent_pauses by agent.
func (p *Provider) PausedAgents(ctx context.Context) ([]lease.AgentPause, error) {
	rows, err := p.query(ctx, p.sql(`
		SELECT agent, paused_at, coalesce(set_by, '') FROM {{schema}}.agent_pauses ORDER BY agent`))
	if err != nil {
		return nil, fmt.Errorf("list paused agents: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.AgentPause, error) {
		var a lease.AgentPause
		err := row.Scan(&a.Agent, &a.At, &a.SetBy)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("list paused agents: %w", mapErr(err))
	}
	return out, nil
}

func (p *Provider) pauseAgent(ctx context.Context, inTx txFunc, agent, setBy string) (lease.AgentPause, error) {
	if !lease.ValidName(agent) {
		return lease.AgentPause{}, fmt.Errorf("pause agent: %w: agent %q does not match %s", lease.ErrInvalid, agent, lease.LanePattern)
	}
	a := lease.AgentPause{Agent: agent}
	err := inTx(ctx, func(b *pgx.Batch) {
		// The no-op update makes RETURNING give the pause already there.
		b.Queue(p.sql(`
			INSERT INTO {{schema}}.agent_pauses AS a (agent, set_by) VALUES ($1, $2)
			ON CONFLICT (agent) DO UPDATE SET agent = a.agent
			RETURNING paused_at, coalesce(set_by, '')`), agent, nullString(setBy)).
			QueryRow(func(row pgx.Row) error { return row.Scan(&a.At, &a.SetBy) })
	})
	if err != nil {
		return lease.AgentPause{}, fmt.Errorf("pause agent %s: %w", agent, mapErr(err))
	}
	return a, nil
}

func (p *Provider) resumeAgent(ctx context.Context, inTx txFunc, agent string) error {
	if !lease.ValidName(agent) {
		return fmt.Errorf("resume agent: %w: agent %q does not match %s", lease.ErrInvalid, agent, lease.LanePattern)
	}
	err := inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`DELETE FROM {{schema}}.agent_pauses WHERE agent = $1`), agent)
	})
	if err != nil {
		return fmt.Errorf("resume agent %s: %w", agent, mapErr(err))
	}
	return nil
}

// PauseAgent pauses an agent on the read pool.
func (d Dashboard) PauseAgent(ctx context.Context, agent, setBy string) (lease.AgentPause, error) {
	return d.pauseAgent(ctx, d.readTx, agent, setBy)
}

// ResumeAgent resumes an agent on the read pool.
func (d Dashboard) ResumeAgent(ctx context.Context, agent string) error {
	return d.resumeAgent(ctx, d.readTx, agent)
}
