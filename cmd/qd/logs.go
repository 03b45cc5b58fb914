package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

var logsCommand = &command{
	name:    "logs",
	summary: "print a run's output: its log file, else the stored tail",
	usage:   "RUN [--follow]",
	help: `Prints the run's log file (<state_dir>/runs/<run>.log, state_dir from the
config) when it is on this machine; otherwise the tail of the output stored on
the run row. A line on stderr says which one is shown. When the daemon could
not write the whole log (a full disk), the run says so and why, and the file
is followed by a marker line and the stored tail. --follow keeps printing
the log file as it grows until the run ends; without a log file it waits for
the run to end and prints the stored tail.`,
	db:    true,
	setup: setupLogs,
}

// pollEvery is how often --follow looks for new output and the run's end.
const pollEvery = 500 * time.Millisecond

func setupLogs(fs *flag.FlagSet) runFunc {
	follow := fs.Bool("follow", false, "keep printing until the run ends")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		id, prov, err := env.idAndProvider(ctx, "run", args)
		if err != nil {
			return err
		}
		r, err := prov.Run(ctx, id)
		if err != nil {
			return err
		}
		path := ""
		if dir := env.stateDir(); dir != "" {
			path = supervisor.LogPath(dir, id)
			if f, err := os.Open(path); err == nil {
				defer f.Close()
				fmt.Fprintf(env.Stderr, "qd: run %d: log file %s\n", id, path)
				return copyLog(ctx, env, prov, f, id, *follow && r.State == lease.RunRunning)
			}
		}
		if r.LogError != "" {
			return incompleteLog(env, r, path)
		}
		if *follow && r.State == lease.RunRunning {
			// The daemon creates a run's log file with its first output.
			fmt.Fprintf(env.Stderr, "qd: run %d: no log file on this machine (yet); waiting for output or the run's end\n", id)
			f, end, err := waitLogOrEnd(ctx, prov, path, id)
			if err != nil {
				return err
			}
			if f != nil {
				defer f.Close()
				fmt.Fprintf(env.Stderr, "qd: run %d: log file %s\n", id, path)
				return copyLog(ctx, env, prov, f, id, end.State == "")
			}
			r = end
		}
		fmt.Fprintf(env.Stderr, "qd: run %d: output tail stored on the run (no log file on this machine)\n", id)
		_, err = io.WriteString(env.Stdout, r.OutputTail)
		return err
	}
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

// copyLog prints f; when following, it keeps printing what is appended
// until the run is no longer running and the file has no more. A run whose
// log file is incomplete ends with its stored tail (see incompleteLog).
func copyLog(ctx context.Context, env *Env, prov lease.Provider, f *os.File, id int64, follow bool) error {
	for {
		if _, err := io.Copy(env.Stdout, f); err != nil {
			return fmt.Errorf("read log of run %d: %w", id, err)
		}
		r, err := prov.Run(ctx, id)
		if err != nil {
			return err
		}
		if follow = follow && r.State == lease.RunRunning; follow { // one more copy after the end
			if err := sleepOrDone(ctx, pollEvery); err != nil {
				return err
			}
			continue
		}
		if r.LogError != "" {
			return incompleteLog(env, r, f.Name())
		}
		return nil
	}
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

// waitLogOrEnd waits until the run's log file at path appears, or the run
// ends. It returns the open file (with a zero Run while the run is still
// running), or the ended run.
func waitLogOrEnd(ctx context.Context, prov lease.Provider, path string, id int64) (*os.File, lease.Run, error) {
	open := func() *os.File {
		if path == "" {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return nil
		}
		return f
	}
	for {
		if err := sleepOrDone(ctx, pollEvery); err != nil {
			return nil, lease.Run{}, err
		}
		if f := open(); f != nil {
			return f, lease.Run{}, nil
		}
		r, err := prov.Run(ctx, id)
		if err != nil {
			return nil, r, err
		}
		if r.State != lease.RunRunning {
			return open(), r, nil // output may have come just before the end
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
