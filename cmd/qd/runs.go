package main

import (
	"context"
	"flag"
	"strconv"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var runsCommand = &command{
	name:    "runs",
	summary: "list runs, newest first",
	usage:   "[--task ID] [--lane L] [--state S] [--limit N] [--json]",
	help: `Columns: id, task, attempt, owner, state, started, duration, exit code or
signal, silence (seconds since the last heartbeat, live runs only), CPU time
and memory peak (measured by the run's cgroup, where it had one), summary.
With --task, the task's runs in attempt order. JSON when --json is given or
stdout is not a terminal.`,
	db:    true,
	reads: true,
	json:  true,
	setup: setupRuns,
}

var runStates = []lease.RunState{lease.RunRunning, lease.RunCompleted, lease.RunFailed, lease.RunAbandoned, lease.RunCancelled}

func setupRuns(fs *flag.FlagSet) runFunc {
	var f lease.RunFilter
	task := fs.String("task", "", "only runs of task `ID`")
	fs.StringVar(&f.Lane, "lane", "", "only lane `NAME`")
	readState := listFlags(fs, "runs", runStates, &f.State, &f.Limit)
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *task != "" {
			id, err := parseID("task", *task)
			if err != nil {
				return err
			}
			f.TaskID = id
		}
		if err := readState(); err != nil {
			return err
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		runs, err := prov.Runs(ctx, f)
		if err != nil {
			return err
		}
		if env.wantJSON() {
			return writeJSON(env.Stdout, jsonList(runs, api.RunOf))
		}
		return writeRunTable(env, runs)
	}
}

func writeRunTable(env *Env, runs []lease.Run) error {
	now := time.Now()
	tb := newTable(env.Stdout, "ID", "TASK", "ATTEMPT", "OWNER", "STATE", "STARTED", "DURATION", "EXIT", "SILENCE", "CPU", "MEM PEAK", "USAGE", "SUMMARY")
	for _, r := range runs {
		tb.row(strconv.FormatInt(r.ID, 10), strconv.FormatInt(r.TaskID, 10), strconv.Itoa(r.Attempt),
			r.Owner, runState(r), relative(r.StartedAt, now), runDuration(r, now), exitText(r),
			silence(r), cpuText(r.CPUTime), bytesText(r.MemoryPeak), usageText(r), truncate(r.Summary, 60))
	}
	return tb.flush()
}

// usageText is what the run reported it spent (qd usage), "-" when
// nothing.
func usageText(r lease.Run) string {
	if r.Usage == nil {
		return "-"
	}
	return money(*r.Usage)
}

// runState marks a running run whose lease has run out and that no claim
// has reaped yet.
func runState(r lease.Run) string {
	switch {
	case r.State == lease.RunRunning && r.LeaseLeft <= 0:
		return "running (lease expired)"
	case r.Deferred:
		return string(r.State) + " (deferred)"
	}
	return string(r.State)
}

func runDuration(r lease.Run, now time.Time) string {
	if r.StartedAt.IsZero() {
		return "-"
	}
	end := r.FinishedAt
	if end.IsZero() {
		end = now
	}
	return duration(end.Sub(r.StartedAt))
}

func exitText(r lease.Run) string {
	switch {
	case r.Signal != "":
		return r.Signal
	case r.ExitCode != nil:
		return strconv.Itoa(*r.ExitCode)
	}
	return "-"
}

func silence(r lease.Run) string {
	if r.State != lease.RunRunning {
		return "-"
	}
	return duration(time.Duration(r.SilentSeconds * float64(time.Second)))
}

// cpuText shows a run's CPU time: milliseconds under a second, tenths of
// a second under a minute, then two units; "-" when not measured.
func cpuText(d *time.Duration) string {
	switch {
	case d == nil:
		return "-"
	case *d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case *d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	}
	return duration(*d)
}

// bytesText shows a size in powers of 1024; "-" when not measured.
func bytesText(n *int64) string {
	if n == nil {
		return "-"
	}
	v, units := float64(*n), []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	if i == 0 {
		return strconv.FormatInt(*n, 10) + "B"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + units[i]
}
