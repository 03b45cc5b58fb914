package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/daemon"
	"github.com/qd-run/qd/metrics"
	"github.com/qd-run/qd/ui"
)

var uiCommand = &command{
	name:    "ui",
	summary: "serve the web dashboard: lanes, agents, runs, tasks, timeline, throughput",
	usage:   "[--listen ADDR] [--read-only] [--token T] [--allow-host NAME]...",
	help: `Serves the dashboard (docs/ui.md) on --listen, 127.0.0.1:7780 by default,
until interrupted. It reads the queue, so it sees every daemon sharing it, and
asks the daemons on this host over their sockets for their schedules and
live runs. Pages update themselves as the queue changes.

An address beyond loopback is refused unless a token is set (--token, else
$QD_UI_TOKEN); the token is then asked of every request, as the password of
basic auth, a bearer token, or once as ?token=. The Host header must name
the listen address, an IP address, localhost or an --allow-host name.
--read-only hides and refuses the actions (enqueue, run now, cancel, retry,
pause and resume). A daemon serves the same pages with a ui block in its
config.`,
	db:    true,
	setup: setupUI,
}

func setupUI(fs *flag.FlagSet) runFunc {
	listen := fs.String("listen", ui.DefaultListen, "serve on `ADDR` (host:port)")
	readOnly := fs.Bool("read-only", false, "hide and refuse every action")
	token := fs.String("token", "", "require `T` of every request (default $QD_UI_TOKEN)")
	var hosts stringList
	fs.Var(&hosts, "allow-host", "also accept `NAME` in the Host header (repeatable)")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if *token == "" {
			*token = env.Getenv("QD_UI_TOKEN")
		}
		if err := ui.CheckListen(*listen, *token); err != nil {
			if errors.Is(err, ui.ErrNeedsToken) {
				return usageErrorf("ui: --listen %s is not a loopback address: give --token T (or set $QD_UI_TOKEN), or listen on 127.0.0.1", *listen)
			}
			return usageErrorf("ui: --listen: %v", err)
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		o, err := daemon.DashboardOptions(prov)
		if err != nil {
			return err
		}
		o.Listen, o.ReadOnly, o.Token, o.AllowedHosts = *listen, *readOnly, *token, hosts
		o.Metrics = metrics.ForQueue(prov, Version())
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "ui", Output: env.Stderr, Level: hclog.Info})
		h, err := ui.New(o)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("ui: listen on %s: %w", *listen, err)
		}
		fmt.Fprintf(env.Stdout, "qd ui: serving http://%s/\n", ln.Addr())
		return ui.Serve(ctx, ln, h)
	}
}
