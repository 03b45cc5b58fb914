package main

import (
	"context"
	"flag"
)

const serviceHelp = `On Linux the service is a systemd unit: with --user a user service
(~/.config/systemd/user/qd.service, systemctl --user) that runs as you while
you are logged in, else the system service (/etc/systemd/system/qd.service,
run as the user qd; needs root). On macOS it is a launchd job: with --user a
LaunchAgent (~/Library/LaunchAgents/com.qd.plist), else a LaunchDaemon
(/Library/LaunchDaemons/com.qd.plist, run as the user who ran sudo). The
file is qd's built-in copy of systemd/qd.service or systemd/com.qd.plist.
See docs/service.md.`

var serviceInstallCommand = &command{
	name:    "service install",
	summary: "install qd run as a service, enable it and start it (systemd, or launchd on macOS)",
	usage:   "[--user] [--config FILE]",
	help: serviceHelp + `

Checks the config first (as qd run --check does: 2 with file:line when it is
invalid), writes the service file naming this qd binary and the config's
absolute path, then enables and starts the service (restarts it when it
runs already): systemctl daemon-reload, enable and restart; or launchctl
enable and bootstrap. The config is --config, else the one qd would find
($QD_CONFIG, ./qd.hcl, ~/.config/qd/qd.hcl, /etc/qd/qd.hcl). With no
database in it the service runs qd's private PostgreSQL in its state_dir,
and stops it, cleanly, when it stops. The system service cannot reach files
under /home, /root, /run/user or /tmp (its sandbox hides them): qd and the
config must live elsewhere, readable by the user qd.`,
	setup: func(fs *flag.FlagSet) runFunc {
		user := fs.Bool("user", false, "a service of your own (systemctl --user, a LaunchAgent) instead of the system's")
		configPath := fs.String("config", "", "config `FILE` the service runs (default: the one qd finds)")
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			h, err := newServiceHost(env, *user)
			if err != nil {
				return err
			}
			return h.install(ctx, *configPath)
		}
	},
}

var serviceStatusCommand = &command{
	name:    "service status",
	summary: "show whether the service is installed and running",
	usage:   "[--user]",
	help: serviceHelp + `

Prints the service file's path, then what systemctl status (or launchctl
print) says of it. Exits 0 when the service runs, 1 when it is not
installed or not running.`,
	setup: func(fs *flag.FlagSet) runFunc {
		user := fs.Bool("user", false, "the service of your own instead of the system's")
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			h, err := newServiceHost(env, *user)
			if err != nil {
				return err
			}
			return h.status(ctx)
		}
	},
}

var serviceUninstallCommand = &command{
	name:    "service uninstall",
	summary: "stop the service, disable it and remove its file",
	usage:   "[--user]",
	help: serviceHelp + `

Stops the service (its daemon drains as on any stop), disables it and
removes the file qd service install wrote. The config, the state directory
and the private PostgreSQL's data stay where they are.`,
	setup: func(fs *flag.FlagSet) runFunc {
		user := fs.Bool("user", false, "the service of your own instead of the system's")
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			h, err := newServiceHost(env, *user)
			if err != nil {
				return err
			}
			return h.uninstall(ctx)
		}
	},
}
