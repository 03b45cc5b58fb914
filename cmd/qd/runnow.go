package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var runNowCommand = &command{
	name:    "run-now",
	summary: "run an agent now: enqueue a task for it and wake its daemon",
	usage:   "AGENT [PAYLOAD] [--lane L]",
	help: `Asks the daemon on this host (the one of $QD_SOCKET, else of the config)
which agents it runs, enqueues a task for AGENT with PAYLOAD (JSON text, "-"
reads stdin, default {}) on --lane, else on the first lane the agent serves,
else on "default", and wakes the daemon so that it claims at once instead of
at the agent's next tick. Prints the task's id. An agent the daemon does not
run exits 2 and lists those it does; a payload that is not JSON exits 2 and
writes nothing; no daemon answering exits 1.`,
	db:    true,
	setup: setupRunNow,
}

func setupRunNow(fs *flag.FlagSet) runFunc {
	lane := fs.String("lane", "", "lane `NAME` (default: the agent's first lane, else \"default\")")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if len(args) < 1 {
			return usageErrorf("run-now: want an AGENT argument")
		}
		agent := args[0]
		payload, err := readPayload(env.Stdin, args[1:])
		if err != nil {
			return err
		}
		c, ok := env.localDaemon()
		if !ok {
			return fmt.Errorf("run-now: no daemon socket on this host: set QD_SOCKET or give --config")
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		snap, err := c.Status(sctx)
		cancel()
		if err != nil {
			return err
		}
		a, err := findAgent(snap, agent)
		if err != nil {
			return err
		}
		p := lease.EnqueueParams{Lane: *lane, Agent: agent, Payload: payload}
		if err := chooseLane(&p, a); err != nil {
			return err
		}
		if err := lease.ValidateEnqueue(&p); err != nil {
			return usageErrorf("run-now: %v", err)
		}
		if sock, ok := viaSocket(env); ok {
			return enqueueViaSocket(ctx, env, sock, p)
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		id, _, err := prov.Enqueue(ctx, p)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, id)
		if err := wakeAgent(ctx, env, agent, id); errors.Is(err, api.ErrUnknownAgent) {
			return err // removed by a reload meanwhile; the task stays queued
		}
		return nil
	}
}

// findAgent returns the daemon's agent named name, or a usage error that
// lists the agents it runs.
func findAgent(s *api.Snapshot, name string) (api.AgentStatus, error) {
	var names []string
	for _, a := range s.Agents {
		if a.Name == name {
			return a, nil
		}
		names = append(names, a.Name)
	}
	if len(names) == 0 {
		names = []string{"none"}
	}
	return api.AgentStatus{}, usageErrorf("run-now: the daemon %s runs no agent %q; it runs: %s", s.Supervisor, name, strings.Join(names, ", "))
}

// chooseLane sets the task's lane: --lane, which must be one the agent
// serves when it names its lanes; else its first; else the default lane.
func chooseLane(p *lease.EnqueueParams, a api.AgentStatus) error {
	switch {
	case p.Lane == "" && len(a.Lanes) > 0:
		p.Lane = a.Lanes[0]
	case p.Lane == "":
		p.Lane = lease.DefaultLane
	case len(a.Lanes) > 0 && !slices.Contains(a.Lanes, p.Lane):
		return usageErrorf("run-now: --lane %q is not among the lanes of agent %s (%s), so its task would never run", p.Lane, a.Name, strings.Join(a.Lanes, ", "))
	}
	return nil
}
