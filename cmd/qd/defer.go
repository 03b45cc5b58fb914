package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
)

var deferCommand = &command{
	name:    "defer",
	summary: "from an agent: try this task again after DURATION; then exit 75",
	usage:   "DURATION",
	help: `For agents run by ` + "`qd run`" + `: a child told "try later" (a 429 with
Retry-After: 30) runs ` + "`qd defer 30s`" + ` and exits with status 75
(EX_TEMPFAIL). Its task is queued again 30 s later and the attempt is not
counted; the run records that it deferred. Exiting 75 without ` + "`qd defer`" + `
defers by the agent's retry_backoff. A task deferred max_deferrals times
(default 100) fails its next deferral instead, as a failed exit would.
Exits 2 outside a run and for a DURATION that is not more than 0 and at
most 30 days.`,
	setup: func(*flag.FlagSet) runFunc { return runDefer },
}

func runDefer(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if len(args) != 1 {
		return usageErrorf("defer: want one DURATION, such as 30s, got %d arguments", len(args))
	}
	d, err := config.ParseDuration(args[0])
	if err != nil || d <= 0 || d > api.MaxDefer {
		return usageErrorf("defer: DURATION %q must be more than 0 and at most %s, such as 30s", args[0], api.MaxDefer)
	}
	sock, runID, err := agentRun(env, "qd defer")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err = env.socketClient(sock).Defer(ctx, runID, d)
	if errors.Is(err, api.ErrUnknownRun) {
		return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("defer run %d: the daemon at %s is not running it", runID, sock)}
	}
	return err
}

// agentRun returns the socket and the run of the agent that runs a
// command only agents may (QD_SOCKET and QD_RUN_ID set), or a usage error
// saying it is for agents.
func agentRun(env *Env, name string) (string, int64, error) {
	sock := env.Getenv("QD_SOCKET")
	runID, err := strconv.ParseInt(env.Getenv("QD_RUN_ID"), 10, 64)
	if sock == "" || err != nil || runID <= 0 {
		return "", 0, forAgents(name)
	}
	return sock, runID, nil
}
