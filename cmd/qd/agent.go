package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var agentPauseCommand = &command{
	name:    "agent pause",
	summary: "stop claiming an agent's tasks, on every lane and daemon, until it is resumed",
	usage:   "AGENT",
	help: `Nothing of AGENT is claimed while it is paused: its queued tasks wait, by
every daemon and every qd claim, on every lane, and tasks enqueued for it
queue behind them. Runs already live go on and settle as usual. The pause
lives in the queue, so it outlasts daemon restarts; qd agent resume ends it.`,
	db:    true,
	json:  true,
	setup: func(*flag.FlagSet) runFunc { return runAgentPause },
}

var agentResumeCommand = &command{
	name:    "agent resume",
	summary: "claim a paused agent's tasks again",
	usage:   "AGENT",
	db:      true,
	setup:   func(*flag.FlagSet) runFunc { return runAgentResume },
}

var agentListCommand = &command{
	name:    "agent list",
	summary: "list the paused agents, since when and by whom",
	usage:   "[--json]",
	db:      true,
	reads:   true,
	json:    true,
	setup:   func(*flag.FlagSet) runFunc { return runAgentList },
}

// agentPauseBy is who `qd agent pause` says paused an agent.
const agentPauseBy = "qd agent pause"

func agentArg(verb string, args []string) (string, error) {
	if len(args) != 1 {
		return "", usageErrorf("agent %s: want one AGENT argument, got %d", verb, len(args))
	}
	if !lease.ValidName(args[0]) {
		return "", usageErrorf("agent %s: agent %q does not match %s", verb, args[0], lease.LanePattern)
	}
	return args[0], nil
}

func runAgentPause(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	agent, err := agentArg("pause", args)
	if err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	a, err := prov.PauseAgent(ctx, agent, agentPauseBy)
	if err != nil {
		return err
	}
	if env.wantJSON() {
		return writeJSON(env.Stdout, api.AgentPauseOf(a))
	}
	fmt.Fprintf(env.Stdout, "agent %s paused %s by %s: its tasks wait until qd agent resume %s; live runs go on\n",
		a.Agent, relative(a.At, time.Now()), orDefault(a.SetBy, "someone unnamed"), a.Agent)
	return nil
}

func runAgentResume(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	agent, err := agentArg("resume", args)
	if err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	if err := prov.ResumeAgent(ctx, agent); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "agent %s resumed: its queued tasks are claimed again\n", agent)
	// The daemon here that runs the agent claims at once rather than at
	// its next tick; any other claims at its own.
	if c, ok := env.localDaemon(); ok {
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = c.Wake(wctx, agent)
	}
	return nil
}

func runAgentList(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	paused, err := prov.PausedAgents(ctx)
	if err != nil {
		return err
	}
	if env.wantJSON() {
		return writeJSON(env.Stdout, jsonList(paused, api.AgentPauseOf))
	}
	now := time.Now()
	t := newTable(env.Stdout, "AGENT", "PAUSED", "SET BY")
	for _, a := range paused {
		t.row(a.Agent, relative(a.At, now), orDefault(a.SetBy, "-"))
	}
	return t.flush()
}

// orDefault is s, or def when s is empty.
func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
