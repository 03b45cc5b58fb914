package main

import (
	"context"
	"flag"
	"fmt"

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
	id, err := oneID("task", args)
	if err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	state, err := prov.Cancel(ctx, id)
	if err != nil {
		return err
	}
	if state == lease.TaskRunning {
		fmt.Fprintf(env.Stdout, "task %d is running; cancellation requested, its holder stops it at the next heartbeat\n", id)
		return nil
	}
	fmt.Fprintf(env.Stdout, "task %d %s\n", id, state)
	return nil
}

func runRetry(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	id, err := oneID("task", args)
	if err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	if err := prov.Retry(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "task %d queued\n", id)
	return nil
}
