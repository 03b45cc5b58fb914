package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

var heartbeatCommand = &command{
	name:    "heartbeat",
	summary: "extend a run's lease and print when it now expires",
	usage:   "RUN [--lease DURATION]",
	help: `Prints the new lease_expires_at (RFC 3339). Exits 4 when the lease is lost
(expired, reaped, settled). When the task was cancelled, the run is settled as
cancelled, a message goes to stderr and qd exits 4: stop working on it.

Inside an agent run by ` + "`qd run`" + ` (QD_SOCKET set, no --db and no
QD_DATABASE_URL) it tells the daemon through its socket that the run made
progress instead: this counts as output for the agent's stall_timeout, the
daemon keeps the lease, nothing is printed, and qd exits 4 when the daemon is
not running that run. A run may report progress only for itself: the daemon
refuses any other run id, and qd exits 1.`,
	db:    true,
	setup: setupHeartbeat,
}

var completeCommand = &command{
	name:    "complete",
	summary: "settle a run as completed; its task is done",
	usage:   "RUN [--summary TEXT]",
	db:      true,
	setup:   settleSetup(lease.RunCompleted, false),
}

var failCommand = &command{
	name:    "fail",
	summary: "settle a run as failed; its task is retried while attempts remain",
	usage:   "RUN [--summary TEXT] [--retry-in DURATION]",
	help: `With attempts left the task is queued again after --retry-in, or by
default after an exponential backoff with ±20% jitter: 10s after the first
attempt, doubling per attempt, at most 1h. With none left the task is failed.`,
	db:    true,
	setup: settleSetup(lease.RunFailed, true),
}

var abandonCommand = &command{
	name:    "abandon",
	summary: "give a run up; its task is claimable again at once",
	usage:   "RUN [--summary TEXT]",
	help:    `The attempt counts toward the task's max attempts.`,
	db:      true,
	setup:   settleSetup(lease.RunAbandoned, false),
}

func setupHeartbeat(fs *flag.FlagSet) runFunc {
	leaseFor := durationFlag(fs, "lease", lease.DefaultLease, "extend the lease to `DURATION` from now")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		id, err := oneID("run", args)
		if err != nil {
			return err
		}
		if sock, ok := viaSocket(env); ok {
			return socketProgress(ctx, env, sock, id)
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		res, err := prov.Heartbeat(ctx, lease.Beat{RunID: id, Lease: *leaseFor})
		if err != nil {
			return err
		}
		if len(res) != 1 {
			return fmt.Errorf("heartbeat run %d: backend answered %d results for one beat", id, len(res))
		}
		if res[0].Err != nil {
			return leaseLost(ctx, prov, "heartbeat", id, res[0].Err)
		}
		if res[0].CancelRequested {
			return cancelRun(ctx, prov, id)
		}
		fmt.Fprintln(env.Stdout, res[0].LeaseExpiresAt.Format(time.RFC3339Nano))
		return nil
	}
}

// cancelRun settles a run whose task was cancelled and reports it as a
// lost lease, so the agent stops.
func cancelRun(ctx context.Context, prov lease.Provider, id int64) error {
	s := lease.Settlement{RunID: id, Outcome: lease.RunCancelled, Summary: "cancelled by operator"}
	if err := settleOne(ctx, prov, s); err != nil && !errors.Is(err, lease.ErrLeaseLost) {
		return fmt.Errorf("settle cancelled run %d: %w", id, err)
	}
	return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("run %d: its task was cancelled; the run is settled as cancelled, stop working on it", id)}
}

func settleSetup(outcome lease.RunState, retry bool) func(fs *flag.FlagSet) runFunc {
	return func(fs *flag.FlagSet) runFunc {
		summary := fs.String("summary", "", "one-line summary `TEXT` recorded on the run")
		var retryIn *time.Duration
		if retry {
			retryIn = durationFlag(fs, "retry-in", 0, "queue the next attempt after `DURATION` (default: exponential backoff)")
		}
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			id, prov, err := env.idAndProvider(ctx, "run", args)
			if err != nil {
				return err
			}
			s := lease.Settlement{RunID: id, Outcome: outcome, Summary: *summary}
			if retryIn != nil {
				s.RetryIn = *retryIn
			}
			if err := settleOne(ctx, prov, s); err != nil {
				return leaseLost(ctx, prov, verbOf(outcome), id, err)
			}
			return nil
		}
	}
}

func verbOf(o lease.RunState) string {
	switch o {
	case lease.RunCompleted:
		return "complete"
	case lease.RunFailed:
		return "fail"
	}
	return "abandon"
}

// settleOne settles one run and returns its own error.
func settleOne(ctx context.Context, prov lease.Provider, s lease.Settlement) error {
	errs, err := prov.Settle(ctx, s)
	if err != nil {
		return err
	}
	if len(errs) != 1 {
		return fmt.Errorf("backend answered %d results for one settlement", len(errs))
	}
	return errs[0]
}

// leaseLost explains a refused heartbeat or settlement. For a lost lease it
// looks the run up to say what became of it, and exits 4; an unknown run
// exits 1.
func leaseLost(ctx context.Context, prov lease.Provider, verb string, id int64, err error) error {
	if !errors.Is(err, lease.ErrLeaseLost) {
		return err
	}
	r, lookErr := prov.Run(ctx, id)
	switch {
	case errors.Is(lookErr, lease.ErrNotFound):
		return fmt.Errorf("%s run %d: no such run", verb, id)
	case lookErr != nil || r.State == lease.RunRunning:
		return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("%s run %d: lease lost: the lease expired", verb, id)}
	}
	why := fmt.Sprintf("the run is already %s", r.State)
	if r.Summary != "" {
		why += fmt.Sprintf(" (%s)", r.Summary)
	}
	return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("%s run %d: lease lost: %s", verb, id, why)}
}
