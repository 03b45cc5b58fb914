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
