package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

var logsCommand = &command{
	name:    "logs",
	summary: "print a run's output, or an agent's runs' in order: log file, else the stored tail",
	usage:   "RUN | --task T | --agent A [--lane L] [--since DURATION] [--follow] [--stderr] [--raw]",
	help: `Prints the run's log file (<state_dir>/runs/<run>.log, state_dir from the
config) when it is on this machine; otherwise the tail of the output stored on
the run row. A line on stderr says which one is shown. When the daemon could
not write the whole log (a full disk), the run says so and why, and the file
is followed by a marker line and the stored tail.

With --task, prints the output of every run of that task, in attempt order;
--follow then follows each as it starts, waiting for the first when none is
claimed yet, until the task is done, failed or cancelled.

With --agent, prints the output of that agent's runs (in --lane, started in
the last --since) oldest first, each headed by a line naming the run, task,
attempt and start time. --follow keeps printing: a running run until it
ends, and with --agent each new run as it starts, until interrupted; every
run followed ends with a line saying how it ended (outcome, exit code or
signal, and the task's next attempt if any). --stderr prints only what the
agent wrote to stderr (the log keeps both streams, merged, and where each
begins).

On a terminal, control characters the agent wrote (escape sequences, a
carriage return) are shown as escapes such as \x1b, so that they cannot
drive the terminal; --raw prints them as they are. Piped or redirected,
the output is byte for byte.`,
	db:    true,
	reads: true,
	setup: setupLogs,
}

// pollEvery is how often --follow looks for new output and the run's end.
const pollEvery = 500 * time.Millisecond

// logOpts are the flags of qd logs.
type logOpts struct {
	follow, stderr, raw bool
	stateDir            string
}

func setupLogs(fs *flag.FlagSet) runFunc {
	var o logOpts
	fs.BoolVar(&o.follow, "follow", false, "keep printing until the run ends (with --agent: until interrupted)")
	fs.BoolVar(&o.stderr, "stderr", false, "print only what the agent wrote to stderr")
	fs.BoolVar(&o.raw, "raw", false, "on a terminal too, print the output byte for byte, control characters and all")
	agent := fs.String("agent", "", "print the runs of agent `NAME`, oldest first")
	task := fs.Int64("task", 0, "print the runs of task `ID`, in attempt order (with --follow: until it ends)")
	lane := fs.String("lane", "", "with --agent: only the runs in lane `NAME`")
	since := durationFlag(fs, "since", 0, "with --agent: only the runs started in the last `DURATION`")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		o.stateDir = env.stateDir()
		if o.raw {
			env.Stdout = rawOutput(env.Stdout)
		}
		if isSet(fs, "task") {
			switch {
			case *task <= 0:
				return usageErrorf("logs: --task %d: a task id is a positive integer", *task)
			case *agent != "" || len(args) > 0:
				return usageErrorf("logs: give one of RUN, --task and --agent")
			}
			prov, err := env.Provider(ctx)
			if err != nil {
				return err
			}
			return stopped(ctx, taskLogs(ctx, env, prov, *task, o))
		}
		if *agent == "" {
			if isSet(fs, "lane") || isSet(fs, "since") {
				return usageErrorf("logs: --lane and --since go with --agent")
			}
			id, prov, err := env.idAndProvider(ctx, "run", args)
			if err != nil {
				return err
			}
			r, err := prov.Run(ctx, id)
			if err != nil {
				return err
			}
			return stopped(ctx, showRun(ctx, env, prov, r, o))
		}
		if len(args) > 0 {
			return usageErrorf("logs: give a RUN or --agent, not both")
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		f := lease.RunFilter{Agent: *agent, Lane: *lane}
		if *since > 0 {
			f.StartedAfter = time.Now().Add(-*since)
		}
		return stopped(ctx, agentLogs(ctx, env, prov, f, o))
	}
}

// stopped is err, unless it says only that ctx ended: a signal (Ctrl-C,
// SIGTERM) stops a followed log, and that is no error.
func stopped(ctx context.Context, err error) error {
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// agentLogs prints the runs f selects oldest first, and with --follow the
// runs that start afterwards, until ctx ends.
func agentLogs(ctx context.Context, env *Env, prov lease.Provider, f lease.RunFilter, o logOpts) error {
	for {
		runs, err := prov.Runs(ctx, f)
		if err != nil {
			return err
		}
		slices.Reverse(runs) // oldest first
		for _, r := range runs {
			if err := printRun(ctx, env, prov, r, o); err != nil {
				return err
			}
			f.AfterID = max(f.AfterID, r.ID)
		}
		if !o.follow {
			return nil
		}
		if sleepOrDone(ctx, pollEvery) != nil {
			return nil // interrupted: following ends there
		}
	}
}

// taskLogs prints the runs of task id in attempt order and, with
// --follow, each run that starts afterwards, until the task has ended and
// every run of it is printed. A task with no run yet is waited for.
func taskLogs(ctx context.Context, env *Env, prov lease.Provider, id int64, o logOpts) error {
	f := lease.RunFilter{TaskID: id}
	waiting := false
	for {
		t, err := prov.Task(ctx, id) // before its runs: a run that ends it is among them
		if err != nil {
			return err
		}
		runs, err := prov.Runs(ctx, f)
		if err != nil {
			return err
		}
		for _, r := range runs { // in attempt order
			if err := printRun(ctx, env, prov, r, o); err != nil {
				return err
			}
			f.AfterID = max(f.AfterID, r.ID)
		}
		if !o.follow || t.State.Finished() {
			return nil
		}
		if f.AfterID == 0 && !waiting {
			waiting = true
			when := "may run now"
			if now := time.Now(); t.RunAfter.After(now) {
				when = "may run " + relative(t.RunAfter, now)
			}
			fmt.Fprintf(env.Stderr, "qd: task %d has no run yet (%s, %s); waiting for its first\n", id, t.State, when)
		}
		if sleepOrDone(ctx, pollEvery) != nil {
			return nil
		}
	}
}

// printRun prints r's output headed by the line naming it.
func printRun(ctx context.Context, env *Env, prov lease.Provider, r lease.Run, o logOpts) error {
	fmt.Fprintf(env.Stdout, "==> run %d, task %d, attempt %d, lane %s, started %s <==\n",
		r.ID, r.TaskID, r.Attempt, r.Lane, r.StartedAt.Local().Format(time.RFC3339))
	return showRun(ctx, env, prov, r, o)
}

// showRun prints r's output: its log file when this machine has it, else
// the tail stored on the run. Following, it prints what the running run
// adds until it ends, and then how it ended.
func showRun(ctx context.Context, env *Env, prov lease.Provider, r lease.Run, o logOpts) error {
	path := ""
	if o.stateDir != "" {
		path = supervisor.LogPath(o.stateDir, r.ID)
	}
	f, err := os.Open(path)
	if err != nil && o.follow && r.State == lease.RunRunning {
		// The daemon creates a run's log file with its first output.
		fmt.Fprintf(env.Stderr, "qd: run %d: no log file on this machine (yet); waiting for output or the run's end\n", r.ID)
		if f, r, err = waitLogOrEnd(ctx, prov, path, r); err != nil {
			return err
		}
	}
	switch {
	case f != nil:
		defer f.Close()
		fmt.Fprintf(env.Stderr, "qd: run %d: log file %s\n", r.ID, path)
		if r, err = copyLog(ctx, env, prov, f, r, o); err != nil {
			return err
		}
		if r.LogError != "" {
			err = incompleteLog(env, r, path)
		}
	case r.LogError != "":
		err = incompleteLog(env, r, path)
	default:
		fmt.Fprintf(env.Stderr, "qd: run %d: output tail stored on the run (no log file on this machine)\n", r.ID)
		if o.stderr {
			fmt.Fprintf(env.Stderr, "qd: run %d: the stored tail keeps both streams merged; --stderr cannot filter it\n", r.ID)
		}
		if o.follow && r.State == lease.RunRunning {
			if r, err = waitEnd(ctx, prov, r.ID); err != nil {
				return err
			}
		}
		_, err = io.WriteString(env.Stdout, r.OutputTail)
	}
	if err == nil && o.follow {
		err = endLine(ctx, env, prov, r)
	}
	return err
}

// copyLog prints f from the start; when following, it keeps printing what
// is appended until the run is no longer running and the file has no more.
// With --stderr it prints only the stderr segments. It returns the run as
// it last read it.
func copyLog(ctx context.Context, env *Env, prov lease.Provider, f *os.File, r lease.Run, o logOpts) (lease.Run, error) {
	var off int64
	follow := o.follow && r.State == lease.RunRunning
	for {
		n, err := copyFrom(env.Stdout, f, off, o, r.ID)
		if err != nil {
			return r, fmt.Errorf("read log of run %d: %w", r.ID, err)
		}
		off += n
		if !follow {
			return r, nil
		}
		if r, err = prov.Run(ctx, r.ID); err != nil {
			return r, err
		}
		follow = r.State == lease.RunRunning // one more copy after the end
		if follow && sleepOrDone(ctx, pollEvery) != nil {
			return r, ctx.Err()
		}
	}
}

// copyFrom prints f from offset off to its end, only the stderr segments
// with --stderr, and returns how many bytes it read.
func copyFrom(w io.Writer, f *os.File, off int64, o logOpts, runID int64) (int64, error) {
	b, err := io.ReadAll(io.NewSectionReader(f, off, 1<<62))
	if err != nil || len(b) == 0 {
		return 0, err
	}
	if !o.stderr {
		_, err = w.Write(b)
		return int64(len(b)), err
	}
	segs, err := supervisor.ReadStreams(supervisor.StreamsPath(o.stateDir, runID))
	if err != nil {
		return 0, err
	}
	for i, s := range segs {
		end := int64(1 << 62)
		if i+1 < len(segs) {
			end = segs[i+1].Offset
		}
		lo, hi := max(s.Offset, off)-off, min(end, off+int64(len(b)))-off
		if s.Stderr && lo < hi {
			if _, err := w.Write(b[lo:hi]); err != nil {
				return 0, err
			}
		}
	}
	return int64(len(b)), nil
}

// endLine says how run r ended, and what becomes of its task.
func endLine(ctx context.Context, env *Env, prov lease.Provider, r lease.Run) error {
	how := string(r.State)
	switch {
	case r.Signal != "":
		how += ", " + r.Signal
	case r.ExitCode != nil:
		how += fmt.Sprintf(", exit code %d", *r.ExitCode)
	}
	if r.Summary != "" {
		how += ": " + r.Summary
	}
	next := ""
	if t, err := prov.Task(ctx, r.TaskID); err == nil {
		switch t.State {
		case lease.TaskQueued:
			next = fmt.Sprintf("; task %d: next attempt (%d of %d) %s", t.ID, t.Attempts+1, t.MaxAttempts, relative(t.RunAfter, time.Now()))
		case lease.TaskRunning:
			next = fmt.Sprintf("; task %d is running again", t.ID)
		default:
			next = fmt.Sprintf("; task %d %s", t.ID, t.State)
		}
	}
	_, err := fmt.Fprintf(env.Stdout, "==> run %d ended: %s%s <==\n", r.ID, how, next)
	return err
}

// incompleteLog says on stderr that the run's log file lacks output and
// why, then prints the output tail stored on the run, after a marker line
// when some of the file was printed before it.
func incompleteLog(env *Env, r lease.Run, path string) error {
	fmt.Fprintf(env.Stderr, "qd: run %d: log file %s is incomplete (%s); showing the output tail stored on the run\n", r.ID, path, r.LogError)
	if _, err := fmt.Fprintf(env.Stdout, "\n[qd: log file incomplete: %s; the last %d bytes of output, stored on the run, follow]\n", r.LogError, len(r.OutputTail)); err != nil {
		return err
	}
	_, err := io.WriteString(env.Stdout, r.OutputTail)
	return err
}

// stateDir is the daemon's state directory from the config (or its
// default), or "" when the config cannot be read.
func (e *Env) stateDir() string {
	conf, err := e.Config()
	if err != nil {
		return ""
	}
	return conf.StateDir
}

// waitLogOrEnd waits until the run's log file at path appears, or the run
// ends. It returns the open file (nil when the run ended without one) and
// the run as last read.
func waitLogOrEnd(ctx context.Context, prov lease.Provider, path string, r lease.Run) (*os.File, lease.Run, error) {
	for {
		if err := sleepOrDone(ctx, pollEvery); err != nil {
			return nil, r, err
		}
		if f, err := os.Open(path); err == nil {
			return f, r, nil
		}
		var err error
		if r, err = prov.Run(ctx, r.ID); err != nil {
			return nil, r, err
		}
		if r.State != lease.RunRunning {
			f, _ := os.Open(path) // output may have come just before the end
			return f, r, nil
		}
	}
}

// waitEnd waits for run id to end and returns it.
func waitEnd(ctx context.Context, prov lease.Provider, id int64) (lease.Run, error) {
	for {
		r, err := prov.Run(ctx, id)
		if err != nil || r.State != lease.RunRunning {
			return r, err
		}
		if err := sleepOrDone(ctx, pollEvery); err != nil {
			return r, err
		}
	}
}

func sleepOrDone(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
