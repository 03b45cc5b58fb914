package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"
	"github.com/qd-run/qd/backend"
	"github.com/qd-run/qd/daemon"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

var daemonCommand = &command{
	name:    "run",
	summary: "run the supervisor daemon",
	usage:   "[--config FILE] [--check]",
	help: `Runs the daemon in the foreground: on each tick of an agent's schedule it
claims that agent's tasks, runs each as a child process, heartbeats the lease
for it and settles the run by the child's exit status. A tick with no task
queued does nothing; periodic blocks enqueue tasks on a timetable.

SIGTERM or SIGINT stops claiming and sends SIGTERM to every child's process
group at once; the children have shutdown_grace to exit, then get SIGKILL
(a second signal skips the wait). SIGHUP reloads the config.

Without --config the first existing file of $QD_CONFIG, ./qd.hcl,
~/.config/qd/qd.hcl and /etc/qd/qd.hcl is used; when there is none the
daemon runs with the defaults and no agents, and says where it looked.
--check validates the config (every agent's command included) and exits:
0 when it is valid, 2 with every problem as file:line otherwise. What is
valid but likely a mistake is a warning, on stderr with --check and in the
daemon's log at start and on reload: an agent whose parallel exceeds the
total limit of its lanes, a periodic that enqueues faster than its agent
wakes, a periodic for an agent this file does not define.`,
	db: true,
	setup: func(fs *flag.FlagSet) runFunc {
		check := fs.Bool("check", false, "validate the config and exit")
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			conf, note, err := daemonConfig(env)
			if err != nil {
				return err
			}
			if *check {
				if err := conf.CheckHost(daemon.HostOf(supervisor.ProbeContainment(), sync.OnceValue(supervisor.ProbeBox))); err != nil {
					return configError(err)
				}
				for _, w := range conf.Warnings {
					fmt.Fprintf(env.Stderr, "qd: warning: %s\n", w)
				}
				fmt.Fprintf(env.Stdout, "%s: ok: %s, %s, %s\n", conf.Source(), count(len(conf.Agents), "agent", "agents"),
					count(len(conf.Periodics), "periodic schedule", "periodic schedules"), count(len(conf.Lanes), "lane", "lanes"))
				return nil
			}
			configured, err := env.configuredURL()
			if err != nil {
				return err
			}
			var notes []string
			env.notes = &notes
			url, err := env.URL(ctx)
			if err != nil {
				return err
			}
			open := func(logger hclog.Logger) (*lease.Backend, error) {
				return backend.Open(context.WithoutCancel(ctx), url, logger)
			}
			var server *daemon.LocalServer
			if configured == "" {
				if server, err = env.localServer(); err != nil {
					return err
				}
				notes = append(notes, serverNote(server))
			}
			return daemon.Run(ctx, daemon.Options{Config: conf, Open: open, Stderr: env.Stderr,
				Note: note, Notes: notes, Server: server, Version: Version(), Signals: daemonSignals})
		}
	},
}

// daemonConfig loads the daemon's config. A missing default file is not an
// error: the defaults are used and note says where qd looked.
func daemonConfig(env *Env) (*config.Config, string, error) {
	path := env.ConfigPath
	if path == "" {
		path = env.Getenv("QD_CONFIG")
	}
	if path != "" {
		conf, err := config.Load(path)
		if err != nil {
			return nil, "", configError(err)
		}
		env.conf = conf
		return conf, "", nil
	}
	found, tried, err := config.Find()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", configError(err)
	}
	if found == "" {
		env.conf = config.Default()
		return env.conf, "no config file found (looked for " + strings.Join(tried, ", ") + "); running with the defaults and no agents", nil
	}
	conf, err := config.Load(found)
	if err != nil {
		return nil, "", configError(err)
	}
	env.conf = conf
	return conf, "", nil
}

// configError makes an invalid config exit 2, like a usage error.
func configError(err error) error {
	var ce *config.Error
	if errors.As(err, &ce) {
		return &ExitError{Code: ExitUsage, Err: err}
	}
	return err
}
