package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qd-run/qd/api"
)

// localDaemon is the client of the daemon on this host: the one whose
// child this process is ($QD_SOCKET), else the one the config names. ok is
// false when there is no socket to try.
func (e *Env) localDaemon() (c api.Client, ok bool) {
	if sock := e.Getenv("QD_SOCKET"); sock != "" {
		return api.Client{Path: sock}, true
	}
	conf, err := e.Config()
	if err != nil || conf.Socket == "" {
		return api.Client{}, false
	}
	return api.Client{Path: conf.Socket}, true
}

// wakeAgent asks the daemon on this host to claim for agent now, for task
// id just enqueued. When it cannot (no daemon here, or one that does not
// run the agent), it says on stderr that the task waits for a tick.
func wakeAgent(ctx context.Context, env *Env, agent string, id int64) error {
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
		return nil
	case errors.Is(err, api.ErrUnknownAgent):
		fmt.Fprintf(env.Stderr, "qd: %v; task %d waits for the next tick of a daemon that runs agent %s\n", err, id, agent)
		return err
	default:
		fmt.Fprintf(env.Stderr, "qd: no daemon answers at %s; task %d waits for the next tick of a daemon that runs agent %s\n", c.Path, id, agent)
		return nil
	}
}
