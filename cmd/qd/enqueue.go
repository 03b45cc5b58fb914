package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var enqueueCommand = &command{
	name:    "enqueue",
	summary: "add a task and print its id",
	usage:   "--lane L --agent A [flags] [PAYLOAD]",
	help: `PAYLOAD is JSON text, "-" reads it from stdin, and it defaults to {}.
Prints the new task's id alone. With --key, when a task with the same key is
not yet finished, prints that task's id instead and adds nothing.
Lower priority numbers run first. A task due now wakes the daemon on this
host (the one of $QD_SOCKET, else of the config) so that it claims at once;
when none answers, or it does not run the agent, stderr says the task waits
for the next tick of a daemon that does. Inside an agent ($QD_SOCKET set, no
--db or $QD_DATABASE_URL) the task goes through the socket into the daemon's
own queue, and records the run that enqueued it.

--after ID (repeatable, or IDs separated by commas) makes the task wait until
every task it names is done: it is "waiting", never claimed, until the last
of them is done, then queued. When one of them fails for good or is
cancelled, the task is cancelled, its summary naming that one. --after-any
waits only for them to finish, however they end. At most 1,000 tasks, each
one that exists already: so no cycle can be made. An id that names no task,
or the new task itself, is refused (exit 2) and nothing is enqueued.`,
	db:    true,
	setup: setupEnqueue,
}

func setupEnqueue(fs *flag.FlagSet) runFunc {
	var p lease.EnqueueParams
	fs.StringVar(&p.Lane, "lane", lease.DefaultLane, "lane `NAME`")
	fs.StringVar(&p.Agent, "agent", "", "agent `NAME` (required)")
	priority := intFlag(fs, "priority", 0, lease.MinPriority, "priority `N`; lower runs first, negatives allowed")
	delay := durationFlag(fs, "in", 0, "run no sooner than `DURATION` from now")
	at := fs.String("at", "", "run no sooner than `TIME` (RFC 3339)")
	maxAttempts := intFlag(fs, "max-attempts", lease.DefaultMaxAttempts, 1, "give up after `N` attempts")
	fs.StringVar(&p.DedupeKey, "key", "", "dedupe `KEY`: reuse the unfinished task with this key")
	readAfter := afterFlags(fs)
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if p.Agent == "" {
			return usageErrorf("enqueue: --agent is required")
		}
		if p.Lane == "" { // an unset shell variable must not mean "default"
			return usageErrorf("enqueue: --lane is empty; a lane name matches %s", lease.LanePattern)
		}
		if isSet(fs, "in") && isSet(fs, "at") {
			return usageErrorf("enqueue: --in and --at cannot be used together")
		}
		if *at != "" {
			t, err := time.Parse(time.RFC3339Nano, *at)
			if err != nil {
				return usageErrorf("enqueue: --at %q is not an RFC 3339 time such as 2025-01-02T15:04:05Z", *at)
			}
			p.RunAfter = t
		}
		p.Delay, p.MaxAttempts, p.Priority = *delay, *maxAttempts, *priority
		if err := readAfter(&p); err != nil {
			return err
		}
		if err := lease.CheckDedupeKey(p.DedupeKey); err != nil {
			return usageErrorf("enqueue: --key: %s", invalidText(err))
		}
		payload, err := readPayload(env.Stdin, args)
		if err != nil {
			return err
		}
		p.Payload = payload
		if err := lease.ValidateEnqueue(&p); err != nil {
			return usageErrorf("enqueue: %v", err)
		}
		if sock, ok := viaSocket(env); ok {
			return enqueueViaSocket(ctx, env, sock, p)
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		id, existed, err := prov.Enqueue(ctx, p)
		if err != nil {
			return err
		}
		fmt.Fprintln(env.Stdout, id)
		if !existed && p.RunAfter.IsZero() && p.Delay == 0 && len(p.After) == 0 {
			_ = wakeFor(ctx, env, p.Agent, p.Lane, id) // a refusal is said on stderr; the task is queued
		}
		return nil
	}
}

// readPayload takes the payload from the one optional argument; "-" reads
// stdin. It checks size and JSON validity before anything is written.
func readPayload(stdin io.Reader, args []string) (json.RawMessage, error) {
	if len(args) > 1 {
		return nil, usageErrorf("enqueue: want at most one PAYLOAD argument, got %d (quote the JSON)", len(args))
	}
	if len(args) == 0 {
		return json.RawMessage("{}"), nil
	}
	b := []byte(args[0])
	if args[0] == "-" {
		var err error
		b, err = io.ReadAll(io.LimitReader(stdin, lease.MaxPayloadBytes+1))
		if err != nil {
			return nil, fmt.Errorf("read payload from stdin: %w", err)
		}
		b = bytes.TrimSpace(b)
	}
	if len(b) > lease.MaxPayloadBytes {
		return nil, usageErrorf("enqueue: payload is more than %d bytes", lease.MaxPayloadBytes)
	}
	if d := lease.PayloadDepth(b); d > lease.MaxPayloadDepth { // json.Valid calls past 10,000 levels invalid
		return nil, usageErrorf("enqueue: payload nests %d levels deep, more than the limit of %d", d, lease.MaxPayloadDepth)
	}
	if !json.Valid(b) {
		return nil, usageErrorf("enqueue: payload is not valid JSON")
	}
	return json.RawMessage(b), nil
}

// enqueueViaSocket adds the task through the daemon whose child this is,
// to the daemon's own queue, and wakes it: an agent holds no database URL,
// and whatever its directory's config or PG variables say, its follow-up
// tasks belong in its daemon's queue.
func enqueueViaSocket(ctx context.Context, env *Env, sock string, p lease.EnqueueParams) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	res, err := env.socketClient(sock).Enqueue(ctx, toRequest(p))
	switch {
	case errors.Is(err, api.ErrBadRequest):
		return usageErrorf("enqueue: %v", err)
	case err != nil:
		return fmt.Errorf("enqueue through the daemon socket %s: %w", sock, err)
	}
	fmt.Fprintln(env.Stdout, res.TaskID)
	switch {
	case res.Existed || !p.RunAfter.IsZero() || p.Delay != 0 || len(p.After) > 0:
	case !res.Woken:
		fmt.Fprintf(env.Stderr, "qd: the daemon at %s does not run agent %s; task %d waits for the next tick of a daemon that does\n", sock, p.Agent, res.TaskID)
	default:
		warnLane(ctx, env, env.socketClient(sock), p.Agent, p.Lane, res.TaskID)
	}
	return nil
}

// toRequest is p as the socket takes it, with a wake.
func toRequest(p lease.EnqueueParams) api.EnqueueRequest {
	return api.EnqueueRequest{Lane: p.Lane, Agent: p.Agent, Payload: p.Payload, Priority: p.Priority,
		RunAfter: p.RunAfter, DelaySeconds: p.Delay.Seconds(), MaxAttempts: p.MaxAttempts,
		DedupeKey: p.DedupeKey, After: p.After, AfterAny: p.AfterAny, Wake: len(p.After) == 0}
}
