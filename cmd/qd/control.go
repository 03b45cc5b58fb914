package main

import (
	"context"
	"errors"
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
		return taskError(ctx, prov, "cancel", id, err)
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
		return taskError(ctx, prov, "retry", id, err)
	}
	fmt.Fprintf(env.Stdout, "task %d queued\n", id)
	return nil
}

// taskError words a refused cancel or retry, naming the task's state on a
// conflict.
func taskError(ctx context.Context, prov lease.Provider, verb string, id int64, err error) error {
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return fmt.Errorf("%s task %d: no such task", verb, id)
	case errors.Is(err, lease.ErrConflict):
		if t, terr := prov.Task(ctx, id); terr == nil {
			return fmt.Errorf("%s task %d: the task is %s", verb, id, t.State)
		}
	}
	return fmt.Errorf("%s task %d: %w", verb, id, err)
}
