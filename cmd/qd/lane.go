package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var laneSetCommand = &command{
	name:    "lane set",
	summary: "create or change a lane: its limit, paused or not",
	usage:   "LANE [--max-running N] [--pause | --resume]",
	help: `Creates the lane when it does not exist (limit 1, not paused), applies the
flags given, and prints the lane. A paused lane keeps its queue; nothing is
claimed from it until it is resumed. Runs already live are not touched.`,
	db:    true,
	json:  true,
	setup: setupLaneSet,
}

var laneListCommand = &command{
	name:    "lane list",
	summary: "list lanes with limit, paused, running, queued and oldest queued",
	usage:   "[--json]",
	db:      true,
	reads:   true,
	json:    true,
	setup:   func(*flag.FlagSet) runFunc { return runLaneList },
}

// laneSetBy is who `qd lane set` says made a change.
const laneSetBy = "qd lane set"

func setupLaneSet(fs *flag.FlagSet) runFunc {
	maxRunning := intFlag(fs, "max-running", 1, 1, "allow at most `N` live runs in the lane")
	pause := fs.Bool("pause", false, "stop claiming from the lane")
	resume := fs.Bool("resume", false, "claim from the lane again")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usageErrorf("lane set: want one LANE argument, got %d", len(args))
		}
		if *pause && *resume {
			return usageErrorf("lane set: --pause and --resume cannot be used together")
		}
		if !lease.ValidName(args[0]) {
			return usageErrorf("lane set: lane %q does not match %s", args[0], lease.LanePattern)
		}
		u := lease.LaneUpdate{Name: args[0], SetBy: laneSetBy}
		if isSet(fs, "max-running") {
			u.MaxRunning = maxRunning
		}
		if *pause || *resume {
			u.Paused = pause
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		l, err := prov.SetLane(ctx, u)
		if err != nil {
			return err
		}
		if l, err = withCounts(ctx, prov, l); err != nil {
			return err
		}
		if env.wantJSON() {
			return writeJSON(env.Stdout, api.LaneOf(l))
		}
		return writeLanes(env, []lease.Lane{l})
	}
}

// withCounts returns the lane l just set as `qd lane list` shows it, with
// its running and queued counts and its oldest queued task, which SetLane
// does not return.
func withCounts(ctx context.Context, prov lease.Provider, l lease.Lane) (lease.Lane, error) {
	lanes, err := prov.Lanes(ctx)
	if err != nil {
		return l, fmt.Errorf("lane %s is set, but listing it failed: %w", l.Name, err)
	}
	for _, got := range lanes {
		if got.Name == l.Name {
			return got, nil
		}
	}
	return l, nil
}

func runLaneList(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	prov, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	lanes, err := prov.Lanes(ctx)
	if err != nil {
		return err
	}
	return writeLanes(env, lanes)
}

func writeLanes(env *Env, lanes []lease.Lane) error {
	if env.wantJSON() {
		return writeJSON(env.Stdout, jsonList(lanes, api.LaneOf))
	}
	now := time.Now()
	t := newTable(env.Stdout, "LANE", "LIMIT", "PAUSED", "RUNNING", "QUEUED", "OLDEST QUEUED", "SET BY")
	for _, l := range lanes {
		setBy := l.SetBy
		if setBy == "" {
			setBy = "defaults"
		}
		t.row(l.Name, strconv.Itoa(l.MaxRunning), yesNo(l.Paused), strconv.Itoa(l.Running), strconv.Itoa(l.Queued), relative(l.OldestQueued, now), setBy)
	}
	return t.flush()
}
