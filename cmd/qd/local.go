package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
)

// localDaemon is the client of the daemon on this host: the one whose
// child this process is ($QD_SOCKET), else the one the config names. ok is
// false when there is no socket to try.
func (e *Env) localDaemon() (c api.Client, ok bool) {
	if sock := e.Getenv("QD_SOCKET"); sock != "" {
		return e.socketClient(sock), true
	}
	conf, err := e.Config()
	if err != nil || conf.Socket == "" {
		return api.Client{}, false
	}
	return e.socketClient(conf.Socket), true
}

// socketClient is the client of the daemon at path. Inside an agent,
// asking its own daemon ($QD_SOCKET), it carries the run's token
// ($QD_RUN_TOKEN), which proves the run; another daemon never gets it.
func (e *Env) socketClient(path string) api.Client {
	c := api.Client{Path: path}
	if path == e.Getenv("QD_SOCKET") {
		c.Token = e.Getenv("QD_RUN_TOKEN")
	}
	return c
}

// wakeAgent asks the daemon on this host to claim for agent now, for task
// id just enqueued. When it cannot (no daemon here, or one that does not
// run the agent), it says on stderr that the task waits for a tick.
func wakeAgent(ctx context.Context, env *Env, agent string, id int64) error {
	return wakeFor(ctx, env, agent, "", id)
}

// wakeFor is wakeAgent for a task of lane (any lane when ""): it also says
// on stderr when the daemon here runs the agent for other lanes only.
func wakeFor(ctx context.Context, env *Env, agent, lane string, id int64) error {
	c, ok := env.localDaemon()
	if !ok {
		fmt.Fprintf(env.Stderr, "qd: no daemon socket on this host; task %d waits for the next tick of a daemon that runs agent %s\n", id, agent)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := c.Wake(ctx, agent)
	switch {
	case err == nil:
		if lane != "" {
			warnLane(ctx, env, c, agent, lane, id)
		}
		return nil
	case errors.Is(err, api.ErrUnknownAgent):
		fmt.Fprintf(env.Stderr, "qd: %v; task %d waits for the next tick of a daemon that runs agent %s\n", err, id, agent)
		return err
	default:
		fmt.Fprintf(env.Stderr, "qd: no daemon answers at %s; task %d waits for the next tick of a daemon that runs agent %s\n", c.Path, id, agent)
		return nil
	}
}

// warnLane says on stderr when the daemon of c runs agent for other lanes
// than lane, so that task id waits for a daemon whose agent serves it.
func warnLane(ctx context.Context, env *Env, c api.Client, agent, lane string, id int64) {
	snap, err := c.Status(ctx)
	if err != nil {
		return
	}
	for _, a := range snap.Agents {
		if a.Name == agent && len(a.Lanes) > 0 && !slices.Contains(a.Lanes, lane) {
			fmt.Fprintf(env.Stderr, "qd: agent %s of the daemon at %s serves lanes %s, not %s; task %d waits for a daemon whose agent %s serves lane %s\n",
				agent, c.Path, strings.Join(a.Lanes, ", "), lane, id, agent, lane)
		}
	}
}
