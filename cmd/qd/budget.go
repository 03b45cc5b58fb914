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

var usageCommand = &command{
	name:    "usage",
	summary: "from an agent: report what this run spent, for its budget",
	usage:   "AMOUNT [--note TEXT]",
	help: `For agents run by ` + "`qd run`" + `: tells the daemon, through its socket
(QD_SOCKET), that this run spent AMOUNT (in the unit its agent's budget
counts: dollars, tokens, anything). Several reports add up on the run
(` + "`qd runs`, `qd show`" + `) and in the budget's period; once the period's
total reaches the budget's max, no run of its agents starts until the next
period. Prints the budget's state. Exits 2 outside a run and for an AMOUNT
that is not a number from 0.`,
	setup: setupUsage,
}

var budgetSetCommand = &command{
	name:    "budget set",
	summary: "create or change a budget, at once for every daemon",
	usage:   "NAME [--max AMOUNT] [--period 1h|1d|1w|1mo] [--timezone ZONE]",
	help: `Creates the budget (which needs --max and --period; the zone is UTC by
default) or changes what the flags give, and prints it. Every daemon's next
claim sees it: raising --max past what the period spent lets runs start
again within a few seconds. A daemon whose config has a budget block of that
name sets it back at its next start or reload. See docs/limits.md.`,
	db:    true,
	json:  true,
	setup: setupBudgetSet,
}

var budgetListCommand = &command{
	name:    "budget list",
	summary: "list budgets: max, period, spent in it, when it resumes, agents",
	usage:   "[--json]",
	db:      true,
	reads:   true,
	json:    true,
	setup:   func(*flag.FlagSet) runFunc { return runBudgetList },
}

// budgetSetBy is who `qd budget set` says made a change.
const budgetSetBy = "qd budget set"

func setupUsage(fs *flag.FlagSet) runFunc {
	note := fs.String("note", "", "record `TEXT` with it, such as \"1,520 tokens\"")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usageErrorf("usage: want one AMOUNT, such as 0.12, got %d arguments", len(args))
		}
		amount, err := strconv.ParseFloat(args[0], 64)
		if err != nil {
			return usageErrorf("usage: AMOUNT %q is not a number, such as 0.12", args[0])
		}
		if err := lease.CheckUsage(amount); err != nil {
			return usageErrorf("usage: %s", invalidText(err))
		}
		sock, runID, err := agentRun(env, "qd usage")
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		res, err := env.socketClient(sock).Usage(ctx, runID, api.UsageRequest{Amount: amount, Note: *note})
		switch {
		case errors.Is(err, api.ErrUnknownRun):
			return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("usage of run %d: the daemon at %s is not running it", runID, sock)}
		case err != nil:
			return err
		case res.Budget == nil:
			return nil
		}
		b := res.Budget
		_, err = fmt.Fprintf(env.Stdout, "%s: %s of %s spent this period\n", b.Name, money(b.Spent), money(b.Max))
		return err
	}
}

func setupBudgetSet(fs *flag.FlagSet) runFunc {
	maxFlag := fs.String("max", "", "allow `AMOUNT` a period")
	period := fs.String("period", "", "calendar `PERIOD`: 1h, 1d, 1w or 1mo")
	zone := fs.String("timezone", "", "periods in time `ZONE` (default UTC)")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usageErrorf("budget set: want one NAME argument, got %d", len(args))
		}
		u := lease.BudgetUpdate{Name: args[0], Period: *period, Timezone: *zone, SetBy: budgetSetBy}
		if *maxFlag != "" {
			m, err := strconv.ParseFloat(*maxFlag, 64)
			if err != nil {
				return usageErrorf("budget set: --max %q is not a number", *maxFlag)
			}
			u.Max = &m
		}
		if err := lease.ValidateBudget(u); err != nil {
			return usageErrorf("budget set: %s", invalidText(err))
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		b, err := prov.SetBudget(ctx, u)
		if err != nil {
			return err
		}
		return writeBudgets(env, []lease.Budget{b})
	}
}

func runBudgetList(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	bs, err := prov.Budgets(ctx)
	if err != nil {
		return err
	}
	return writeBudgets(env, bs)
}

func writeBudgets(env *Env, bs []lease.Budget) error {
	if env.wantJSON() {
		return writeJSON(env.Stdout, jsonList(bs, api.BudgetOf))
	}
	t := newTable(env.Stdout, "BUDGET", "MAX", "PERIOD", "SPENT", "STATE", "AGENTS", "SET BY")
	for _, b := range bs {
		agents := strings.Join(b.Agents, ",")
		if agents == "" {
			agents = "-"
		}
		t.row(b.Name, money(b.Max), b.Period+" "+b.Timezone, money(b.Spent), budgetState(b), agents, b.SetBy)
	}
	return t.flush()
}

// budgetState says whether runs of the budget may start, and if not when
// they may again.
func budgetState(b lease.Budget) string {
	if !b.Exhausted() {
		return "open"
	}
	return "spent; resumes " + b.PeriodEnd.In(zoneOf(b.Timezone)).Format("2006-01-02 15:04 MST")
}

func zoneOf(name string) *time.Location {
	if loc, err := time.LoadLocation(name); err == nil {
		return loc
	}
	return time.UTC
}

// money writes an amount with two decimals, more when it has them.
func money(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if i := strings.IndexByte(s, '.'); i < 0 || len(s)-i-1 < 2 {
		return strconv.FormatFloat(f, 'f', 2, 64)
	}
	return s
}
