package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var limitSetCommand = &command{
	name:    "limit set",
	summary: "create or change a rate limit, at once for every daemon",
	usage:   "NAME --rate UNITS/PERIOD [--burst N]",
	help: `Creates the limit when it does not exist (burst 0) or changes its rate, and
its burst when --burst is given, and prints it. Every daemon and claimer
takes the new rate from its next claim. A daemon whose config has a limit
block of that name sets it back at its next start or reload. See
docs/limits.md.`,
	db:    true,
	json:  true,
	setup: setupLimitSet,
}

var limitListCommand = &command{
	name:    "limit list",
	summary: "list rate limits: rate, burst, units available, next unit, agents",
	usage:   "[--json]",
	db:      true,
	reads:   true,
	json:    true,
	setup:   func(*flag.FlagSet) runFunc { return runLimitList },
}

var spendCommand = &command{
	name:    "spend",
	summary: "from an agent: take N more units of a rate limit for this run",
	usage:   "LIMIT N",
	help: `For agents run by ` + "`qd run`" + `: tells the daemon, through its socket
(QD_SOCKET), that the run used N more units of the limit than the one its
claim took (the tokens of a language model's answer, say). The limit may go
into debt, which holds later claims of every daemon back until it is paid.
Prints the limit's units after the spend. Exits 2 outside a run, for an N
that is not a whole number from 1 to 2^31, or a limit that does not exist.`,
	setup: setupSpend,
}

// limitSetBy is who `qd limit set` says made a change.
const limitSetBy = "qd limit set"

func setupLimitSet(fs *flag.FlagSet) runFunc {
	rate := fs.String("rate", "", "at most `UNITS/PERIOD`, such as 120/1m")
	burst := intFlag(fs, "burst", 0, 0, "allow `N` units beyond the steady rate")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usageErrorf("limit set: want one NAME argument, got %d", len(args))
		}
		if !lease.ValidName(args[0]) {
			return usageErrorf("limit set: limit %q does not match %s", args[0], lease.LanePattern)
		}
		if *rate == "" {
			return usageErrorf("limit set: --rate is required, such as --rate 120/1m")
		}
		n, per, err := lease.ParseRate(*rate)
		if err != nil {
			return usageErrorf("limit set: --rate: %s", invalidText(err))
		}
		u := lease.LimitUpdate{Name: args[0], Rate: n, Per: per, SetBy: limitSetBy}
		if isSet(fs, "burst") {
			u.Burst = burst
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		l, err := prov.SetLimit(ctx, u)
		if err != nil {
			return err
		}
		return writeLimits(env, []lease.Limit{l})
	}
}

func runLimitList(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	ls, err := prov.Limits(ctx)
	if err != nil {
		return err
	}
	return writeLimits(env, ls)
}

func writeLimits(env *Env, ls []lease.Limit) error {
	if env.wantJSON() {
		return writeJSON(env.Stdout, jsonList(ls, api.LimitOf))
	}
	now := time.Now()
	t := newTable(env.Stdout, "LIMIT", "RATE", "BURST", "AVAILABLE", "NEXT UNIT", "AGENTS", "SET BY")
	for _, l := range ls {
		next := "-"
		if !l.NextUnitAt.IsZero() {
			next = relative(l.NextUnitAt, now)
		}
		agents := strings.Join(l.Agents, ",")
		if agents == "" {
			agents = "-"
		}
		t.row(l.Name, lease.FormatRate(l.Rate, l.Per), strconv.Itoa(l.Burst), strconv.Itoa(l.Available), next, agents,
			l.SetBy)
	}
	return t.flush()
}

// forAgents is the usage error of a command that only an agent's run may
// send (no QD_SOCKET).
func forAgents(name string) error {
	return usageErrorf("%s is for agents: run it from a program `qd run` started, which has QD_SOCKET and QD_RUN_ID set", name)
}

func setupSpend(*flag.FlagSet) runFunc {
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if len(args) != 2 {
			return usageErrorf("spend: want LIMIT and N, got %d arguments", len(args))
		}
		name := args[0]
		units, err := strconv.ParseInt(args[1], 10, 64)
		if err != nil {
			return usageErrorf("spend: N %q is not a whole number of units", args[1])
		}
		if err := lease.CheckSpend(name, units); err != nil {
			return usageErrorf("spend: %s", invalidText(err))
		}
		sock := env.Getenv("QD_SOCKET")
		if sock == "" {
			return forAgents("qd spend")
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := env.socketClient(sock).Spend(ctx, name, units)
		switch {
		case errors.Is(err, api.ErrUnknownLimit):
			return usageErrorf("spend: limit %q is not declared: add a limit block to the daemon's config, or `qd limit set %s --rate ...`", name, name)
		case err != nil:
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s: %d available\n", l.Name, l.Available)
		return err
	}
}
