package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/internal/config"
)

var statusCommand = &command{
	name:    "status",
	summary: "show what the running daemon is doing",
	usage:   "[--socket PATH | --config FILE] [--json] [--runs N|all] [--watch [--interval DURATION]]",
	help: `Asks the daemon over its unix socket: supervisor, version, uptime, whether
the database answers, agents with their next tick, in-flight runs (pid, age,
seconds since the last heartbeat and since the last output, lease left) and
queue depth per lane. The socket is --socket, else the config's socket (from
--config or the default config paths), else the default socket path. When no
daemon answers, the message names the socket it tried and the exit code is 1.
The table lists the 100 oldest runs in flight and counts the rest; --runs
lists as many (all: every one), and --json lists every run unless --runs is
given. --watch redraws the table in place until interrupted.`,
	json: true,
	setup: func(fs *flag.FlagSet) runFunc {
		socket := fs.String("socket", "", "status socket `PATH` (default: the config's socket)")
		configPath := fs.String("config", "", "config `FILE` whose socket to ask")
		watch := fs.Bool("watch", false, "refresh the status in place until interrupted")
		interval := durationFlag(fs, "interval", 2*time.Second, "refresh interval with --watch")
		runsFlag := fs.String("runs", "", "runs in flight to list, oldest first: `N` or all (default: 100 in the table, all with --json)")
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			runs, err := statusRuns(*runsFlag, env.JSON)
			if err != nil {
				return err
			}
			path := *socket
			if path == "" {
				env.ConfigPath = *configPath
				conf, err := env.Config()
				if err != nil {
					// The daemon may be running on the config as it was
					// before: ask the socket the file names anyway.
					file, _ := env.configPath()
					path = config.SocketOf(file)
					fmt.Fprintf(env.Stderr, "qd: %s is invalid, asking the socket it names (%s); the first problem: %s\n",
						file, path, firstLine(err.Error()))
				} else {
					path = conf.Socket
				}
			}
			if !*watch {
				return showStatus(ctx, env, path, env.JSON, runs)
			}
			return watchStatus(ctx, env, path, *interval, runs)
		}
	},
}

// statusTableRuns is how many runs in flight the status table lists when
// --runs does not say: a screenful, and a status of 10,000 children that
// costs the daemon what 100 cost.
const statusTableRuns = 100

// statusRuns reads --runs: how many runs to ask the daemon for, -1 for
// every one.
func statusRuns(v string, asJSON bool) (int, error) {
	switch v {
	case "":
		if asJSON {
			return -1, nil
		}
		return statusTableRuns, nil
	case "all":
		return -1, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, usageErrorf("--runs %q: give how many runs in flight to list (0 or more), or all", v)
	}
	return n, nil
}

func showStatus(ctx context.Context, env *Env, path string, asJSON bool, runs int) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	snap, err := env.socketClient(path).StatusRuns(ctx, runs)
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env.Stdout, snap)
	}
	return renderStatus(env.Stdout, snap, time.Now())
}

func watchStatus(ctx context.Context, env *Env, path string, every time.Duration, runs int) error {
	for {
		writeRaw(env.Stdout, "\x1b[H\x1b[2J")
		if err := showStatus(ctx, env, path, false, runs); err != nil {
			fmt.Fprintf(env.Stdout, "%s\n", err)
		}
		fmt.Fprintf(env.Stdout, "\nlast updated %s; every %s, Ctrl-C to stop\n", time.Now().Format("15:04:05"), every)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// firstLine is s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
