package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/metrics"
	"github.com/qd-run/qd/supervisor"
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
basic auth, a bearer token, or once as ?token=. Without one, the page
answers only this user and root, as the kernel says who made each
connection, and holders of the local token in STATE_DIR/ui-token (made at
the first start, mode 0600), which qd ui prints in the URL on a terminal;
everyone else gets 403. The Host header must name the listen address, an IP
address, localhost or an --allow-host name.
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
		b, err := env.Backend(ctx)
		if err != nil {
			return err
		}
		o, err := ui.OptionsFor(b)
		if err != nil {
			return err
		}
		o.Listen, o.ReadOnly, o.Token, o.AllowedHosts = *listen, *readOnly, *token, hosts
		o.LogPath = supervisor.LogPath
		o.Metrics = metrics.ForQueue(b.Provider, Version())
		o.Logger = hclog.New(&hclog.LoggerOptions{Name: "ui", Output: env.Stderr, Level: hclog.Info})
		if o.Token == "" {
			sd := env.stateDir()
			if sd == "" { // no config to read: the state directory it would default to
				sd = config.Default().StateDir
			}
			if o.LocalToken, o.TokenFile, err = ui.LocalToken(sd); err != nil {
				fmt.Fprintf(env.Stderr, "qd ui: no local token, so only this user and root get in: %v\n", err)
				o.LocalToken, o.TokenFile = "", ""
			}
		}
		d, err := ui.New(o)
		if err != nil {
			return err
		}
		ln, err := net.Listen("tcp", *listen)
		if err != nil {
			return fmt.Errorf("ui: listen on %s: %w", *listen, err)
		}
		fmt.Fprintf(env.Stdout, "qd ui: serving %s\n", serving(env, ln.Addr().String(), o.LocalToken, o.TokenFile))
		return d.Serve(ctx, ln)
	}
}

// serving is the dashboard's URL as qd ui prints it: with the local
// token, which opens it in any browser on this host, when stdout is a
// terminal; else (a log, say) with only the path of the token's file.
func serving(env *Env, addr, token, file string) string {
	u := "http://" + addr + "/"
	switch {
	case token == "":
		return u
	case isTerminal(env.Stdout):
		return u + "?token=" + token
	}
	return u + " (its token is in " + file + ")"
}
