package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var cancelCommand = &command{
	name:    "cancel",
	summary: "cancel a task: at once when queued; a running one is stopped at once, or within a second",
	usage:   "TASK [--chain]",
	help: `A queued or waiting task becomes cancelled at once, and so does what waits
for it (qd enqueue --after), in turn; a task that waits for any end
(--after-any) is queued instead. With --chain, every task waiting for it,
directly or through others, is cancelled too, whatever it waits for.` + "\n\n" + `A queued task becomes cancelled at once. A running task is marked in the
database, and the daemon on this host that runs it (the one of $QD_SOCKET, else
of the config) is asked to stop it now: SIGTERM to the child's group, SIGKILL
after its kill_grace. A daemon elsewhere stops it within about a second (every
daemon with live runs asks the database once a second); a qd claim holder
learns it at its next qd heartbeat, which exits 4. The run is settled as
cancelled. Exits 1 when the task is already done or failed.

Inside an agent run by ` + "`qd run`" + ` (QD_SOCKET set, no --db and no
QD_DATABASE_URL) the cancel goes through the daemon's socket, which records it
in the database and stops the run at once when it runs it. A run may cancel
only its own task and the tasks it enqueued: the daemon refuses any other, and
qd exits 1.`,
	db:    true,
	json:  true,
	setup: setupCancel,
}

var retryCommand = &command{
	name:    "retry",
	summary: "queue a failed or cancelled task again with fresh attempts",
	usage:   "TASK [--chain]",
	help: `The task's earlier runs stay in its history. A task that waits for others
waits again. With --chain, the tasks its failure (or cancel) cancelled come
back too, waiting for it again, and theirs in turn; each task brought back is
printed with its state.`,
	db:    true,
	json:  true,
	setup: setupRetry,
}

func setupCancel(fs *flag.FlagSet) runFunc {
	chain := fs.Bool("chain", false, "cancel everything waiting for the task too")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if !*chain {
			return runCancel(ctx, env, fs, args)
		}
		if _, ok := viaSocket(env); ok {
			return usageErrorf("cancel --chain works on the queue, not through an agent's socket: cancel the tasks one by one, or give --db")
		}
		id, prov, err := env.idAndProvider(ctx, "task", args)
		if err != nil {
			return err
		}
		links, err := prov.CancelChain(ctx, id)
		if err != nil {
			return err
		}
		if links[len(links)-1].State == lease.TaskRunning {
			fmt.Fprintln(env.Stderr, "qd: "+stopRunning(ctx, env, id))
		}
		return writeLinks(env, links)
	}
}

func setupRetry(fs *flag.FlagSet) runFunc {
	chain := fs.Bool("chain", false, "bring back the tasks its failure cancelled too")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if !*chain {
			return runRetry(ctx, env, fs, args)
		}
		id, prov, err := env.idAndProvider(ctx, "task", args)
		if err != nil {
			return err
		}
		links, err := prov.RetryChain(ctx, id)
		if err != nil {
			return err
		}
		return writeLinks(env, links)
	}
}

func runCancel(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if sock, ok := viaSocket(env); ok {
		id, err := oneID("task", args)
		if err != nil {
			return err
		}
		return cancelViaSocket(ctx, env, sock, id)
	}
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
	elsewhere := runningElsewhere(id)
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

// cancelViaSocket cancels task id through the daemon whose child this is:
// the daemon records the request in its queue and stops the run if it
// runs it. The daemon's refusal (not this run's task, nor one it enqueued)
// is printed as it said it, and exits 1.
func cancelViaSocket(ctx context.Context, env *Env, sock string, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := env.socketClient(sock).CancelTask(ctx, id)
	switch {
	case errors.Is(err, api.ErrRefused), errors.Is(err, api.ErrUnknownTask), errors.Is(err, api.ErrConflict):
		return err
	case err != nil:
		return fmt.Errorf("cancel task %d through the daemon socket %s: %w", id, sock, err)
	}
	switch {
	case res.State != string(lease.TaskRunning):
		fmt.Fprintf(env.Stdout, "task %d %s\n", id, res.State)
	case res.RunID != 0:
		fmt.Fprintf(env.Stdout, "task %d cancelled: run %d stopped now by the daemon on this host\n", id, res.RunID)
	default:
		fmt.Fprintln(env.Stdout, runningElsewhere(id))
	}
	return nil
}

// runningElsewhere says a cancel of running task id is recorded, for the
// daemon that runs it to act on.
func runningElsewhere(id int64) string {
	return fmt.Sprintf("task %d is running elsewhere; cancel requested: its daemon stops it within about a second (a `qd claim` holder at its next heartbeat)", id)
}

func runRetry(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	id, prov, err := env.idAndProvider(ctx, "task", args)
	if err != nil {
		return err
	}
	if err := prov.Retry(ctx, id); err != nil {
		return err
	}
	t, err := prov.Task(ctx, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "task %d %s\n", id, t.State)
	return nil
}
