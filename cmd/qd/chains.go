package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var resultCommand = &command{
	name:    "result",
	summary: "print a task's result; inside an agent, `qd result -` stores its own",
	usage:   "TASK | -",
	help: `qd result TASK prints the result of the run that completed TASK, as the agent
stored it (null when it stored none, or the task is not done).

Inside an agent run by ` + "`qd run`" + ` (QD_SOCKET set), qd result - reads JSON
from stdin, at most 1 MiB, and sends it through the daemon's socket: it is
stored with the run when the run completes (exits 0), and is then the task's
result. A later one replaces it; a file written to $QD_RESULT wins over both.
A result that is not JSON or is larger is refused: exit 2.`,
	db:    true,
	reads: true,
	setup: func(*flag.FlagSet) runFunc { return runResult },
}

var resultsCommand = &command{
	name:    "results",
	summary: "inside an agent: print the results of the tasks its task waited for",
	usage:   "--parents",
	help: `Prints one JSON object keyed by task id: the result of each task this run's
task waited for (qd enqueue --after), null for one that stored none. The same
object is in the file $QD_PARENT_RESULTS names when the run starts. Only
inside an agent run by ` + "`qd run`" + ` (QD_SOCKET set): elsewhere, exit 2.`,
	setup: setupResults,
}

func runResult(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if len(args) == 1 && args[0] == "-" {
		return storeResult(ctx, env)
	}
	id, prov, err := env.idAndProvider(ctx, "task", args)
	if err != nil {
		return err
	}
	t, err := prov.Task(ctx, id)
	if err != nil {
		return err
	}
	if t.Result == nil {
		fmt.Fprintln(env.Stdout, "null")
		return nil
	}
	return writeJSON(env.Stdout, t.Result)
}

// storeResult sends stdin to the daemon as this run's result.
func storeResult(ctx context.Context, env *Env) error {
	sock, run, err := ownRun(env, "result -")
	if err != nil {
		return err
	}
	b, err := io.ReadAll(io.LimitReader(env.Stdin, lease.MaxResultBytes+1))
	if err != nil {
		return fmt.Errorf("result: read stdin: %w", err)
	}
	b = bytes.TrimSpace(b)
	if err := lease.CheckResult(b); err != nil {
		return usageErrorf("result: %s", invalidText(err))
	}
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err = env.socketClient(sock).SetResult(ctx, run, b)
	if errors.Is(err, api.ErrBadRequest) {
		return usageErrorf("result: %v", err)
	}
	return err
}

// ownRun is the socket and the run of the agent this is, or a usage error
// saying that what only works inside one.
func ownRun(env *Env, what string) (string, int64, error) {
	sock := env.Getenv("QD_SOCKET")
	run, err := strconv.ParseInt(env.Getenv("QD_RUN_ID"), 10, 64)
	if sock == "" || err != nil || run <= 0 {
		return "", 0, usageErrorf("%s works only inside an agent run by `qd run` ($QD_SOCKET and $QD_RUN_ID are not set)", what)
	}
	return sock, run, nil
}

func setupResults(fs *flag.FlagSet) runFunc {
	parents := fs.Bool("parents", false, "the results of the tasks this run's task waited for")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if !*parents {
			return usageErrorf("results: --parents is required")
		}
		sock, run, err := ownRun(env, "results --parents")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		b, err := env.socketClient(sock).ParentResults(ctx, run)
		if err != nil {
			return err
		}
		_, err = env.Stdout.Write(b)
		return err
	}
}

// afterFlags registers --after and --after-any, each repeatable, and
// returns the function that reads them into p.
func afterFlags(fs *flag.FlagSet) func(p *lease.EnqueueParams) error {
	var all, anyOf stringList
	fs.Var(&all, "after", "wait until task `ID` is done (repeatable); cancelled if it fails or is cancelled")
	fs.Var(&anyOf, "after-any", "wait until task `ID` has finished, however it ends (repeatable)")
	return func(p *lease.EnqueueParams) error {
		if len(all) > 0 && len(anyOf) > 0 {
			return usageErrorf("enqueue: --after and --after-any cannot be used together")
		}
		flagName, list := "--after", all
		if len(anyOf) > 0 {
			flagName, list, p.AfterAny = "--after-any", anyOf, true
		}
		for _, v := range list {
			for _, s := range strings.Split(v, ",") {
				id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
				if err != nil || id <= 0 {
					return usageErrorf("enqueue: %s %q is not a task id", flagName, s)
				}
				p.After = append(p.After, id)
			}
		}
		if len(p.After) > lease.MaxAfter {
			return usageErrorf("enqueue: %s names %d tasks; a task may wait for at most %d", flagName, len(p.After), lease.MaxAfter)
		}
		return nil
	}
}

// writeChain prints the tasks t waits for and those waiting for it.
func writeChain(env *Env, parents, dependents []lease.Link) error {
	for _, part := range []struct {
		title string
		links []lease.Link
	}{{"waits for", parents}, {"waited for by", dependents}} {
		if len(part.links) == 0 {
			continue
		}
		fmt.Fprintf(env.Stdout, "\n%s:\n", part.title)
		tb := newTable(env.Stdout, "TASK", "LANE", "AGENT", "STATE", "SUMMARY")
		for _, l := range part.links {
			tb.row(strconv.FormatInt(l.ID, 10), l.Lane, l.Agent, string(l.State), truncate(l.Summary, 60))
		}
		if err := tb.flush(); err != nil {
			return err
		}
	}
	return nil
}

// writeLinks prints what a --chain cancel or retry did, one task a line.
func writeLinks(env *Env, links []lease.Link) error {
	if env.wantJSON() {
		return writeJSON(env.Stdout, jsonList(links, api.LinkOf))
	}
	for _, l := range links {
		fmt.Fprintf(env.Stdout, "task %d %s\n", l.ID, l.State)
	}
	return nil
}
