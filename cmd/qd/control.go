package main

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

var cancelCommand = &command{
	name:    "cancel",
	summary: "cancel a task: at once when queued, at its next heartbeat when running",
	usage:   "TASK",
	help: `A queued task becomes cancelled at once. A running task is marked; the
supervisor or client holding it learns this at its next heartbeat, stops the
work and settles the run as cancelled. Exits 1 when the task is already done or
failed.`,
	db:    true,
	setup: func(*flag.FlagSet) runFunc { return runCancel },
}

var retryCommand = &command{
	name:    "retry",
	summary: "queue a failed or cancelled task again with fresh attempts",
	usage:   "TASK",
	help:    `The task's earlier runs stay in its history.`,
	db:      true,
	setup:   func(*flag.FlagSet) runFunc { return runRetry },
}

func runCancel(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	id, prov, err := env.idAndProvider(ctx, "task", args)
	if err != nil {
		return err
	}
	state, err := prov.Cancel(ctx, id)
	if err != nil {
		return err
	}
	if state == lease.TaskRunning {
		fmt.Fprintln(env.Stdout, stopRunning(ctx, env, id))
		return nil
	}
	fmt.Fprintf(env.Stdout, "task %d %s\n", id, state)
	return nil
}

// stopRunning asks the daemon on this host to stop the run of task id at
// once, and says which of the two ways the cancel takes: stopped here now,
// or left to the daemon that runs it, which polls for cancels every second
// (a holder that is not a daemon learns it at its next `qd heartbeat`).
func stopRunning(ctx context.Context, env *Env, id int64) string {
	elsewhere := fmt.Sprintf("task %d is running elsewhere; cancel requested: its daemon stops it within about a second (a `qd claim` holder at its next heartbeat)", id)
	c, ok := env.localDaemon()
	if !ok {
		return elsewhere
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := c.CancelTask(ctx, id)
	if err != nil || res.RunID == 0 {
		return elsewhere
	}
	return fmt.Sprintf("task %d cancelled: run %d stopped now by the daemon on this host", id, res.RunID)
}

func runRetry(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	id, prov, err := env.idAndProvider(ctx, "task", args)
	if err != nil {
		return err
	}
	if err := prov.Retry(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "task %d queued\n", id)
	return nil
}
