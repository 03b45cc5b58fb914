package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/localpg"
	"github.com/qd-run/qd/lease"
)

const dbHelp = `The private cluster is the PostgreSQL qd uses when no database is configured
(--db, $QD_DATABASE_URL, the config's database): state_dir/pg, where
state_dir is the config's, else $XDG_STATE_HOME/qd (~/.local/state/qd), or
/var/lib/qd for root. It listens on a unix socket in that directory only,
and outlives the command that started it. Commands that only read the queue
(tasks, runs, show, logs, lane list) never start it. See docs/database.md.`

var dbStartCommand = &command{
	name:    "db start",
	summary: "start the private PostgreSQL cluster, making it on first use",
	usage:   "[--config FILE]",
	help: dbHelp + `

Any command that writes to the queue starts it too; db start does only that,
and prints its URL.`,
	db: true,
	setup: func(*flag.FlagSet) runFunc {
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			url, err := env.privateURL(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintln(env.Stdout, url)
			return nil
		}
	},
}

var dbStopCommand = &command{
	name:    "db stop",
	summary: "stop the private PostgreSQL cluster",
	usage:   "[--config FILE] [--immediate]",
	help: dbHelp + `

A daemon using it loses its database until a command that writes starts it
again (a daemon starts again a cluster that died, not one stopped), and
kills the runs whose leases it cannot renew: stop the daemon first.`,
	db: true,
	setup: func(fs *flag.FlagSet) runFunc {
		immediate := fs.Bool("immediate", false, "stop at once, without a shutdown checkpoint (the next start recovers)")
		return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			c, err := env.privateCluster()
			if err != nil {
				return err
			}
			mode := localpg.Fast
			if *immediate {
				mode = localpg.Immediate
			}
			stopped, err := c.Stop(ctx, mode)
			if err != nil {
				return err
			}
			if stopped {
				fmt.Fprintf(env.Stdout, "stopped the private PostgreSQL in %s\n", c.Dir())
			} else {
				fmt.Fprintf(env.Stdout, "the private PostgreSQL in %s is not running\n", c.Dir())
			}
			return nil
		}
	},
}

var dbStatusCommand = &command{
	name:    "db status",
	summary: "show where the private PostgreSQL cluster lives, its state and its URL",
	usage:   "[--config FILE] [--json]",
	help: dbHelp + `

Starts nothing. Shows the directory, whether the server runs (pid, since),
the server's version and binaries, the data's version and size, the socket,
the user it runs as, its log, and the URL to give psql.`,
	db:   true,
	json: true,
	setup: func(*flag.FlagSet) runFunc {
		return func(_ context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			c, err := env.privateCluster()
			if err != nil {
				return err
			}
			configured, err := env.configuredURL()
			if err != nil {
				return err
			}
			s := toDBStatusJSON(c.Status(), configured)
			if env.wantJSON() {
				return writeJSON(env.Stdout, s)
			}
			renderDBStatus(env.Stdout, s, time.Now())
			return nil
		}
	},
}

// dbStatusJSON is the JSON form of `qd db status`.
type dbStatusJSON struct {
	Dir         string     `json:"dir"`
	DataDir     string     `json:"data_dir"`
	Created     bool       `json:"created"`
	Running     bool       `json:"running"`
	PID         int        `json:"pid,omitempty"`
	Since       *time.Time `json:"since"`
	Socket      string     `json:"socket_dir"`
	URL         string     `json:"url"`
	Owner       string     `json:"owner"`
	DataVersion string     `json:"data_version"`
	SizeBytes   int64      `json:"size_bytes"`
	BinDir      string     `json:"bin_dir"`
	Version     string     `json:"server_version"`
	BinError    string     `json:"bin_error,omitempty"`
	Log         string     `json:"log"`
	InUse       bool       `json:"in_use"`
	Configured  string     `json:"configured_url,omitempty"`
}

func toDBStatusJSON(s localpg.Status, configured string) dbStatusJSON {
	j := dbStatusJSON{Dir: s.Dir, DataDir: s.DataDir, Created: s.Created, Running: s.Running, PID: s.PID,
		Socket: s.SocketDir, URL: s.URL, Owner: s.Owner, DataVersion: s.DataVersion, SizeBytes: s.Size,
		BinDir: s.BinDir, Version: s.Version, BinError: s.BinError, Log: s.LogPath,
		InUse: configured == "", Configured: lease.Redact(configured)}
	if s.Running {
		j.Since = api.When(s.Since)
	}
	return j
}

// renderDBStatus prints the status as one "what  value" line each.
func renderDBStatus(w io.Writer, s dbStatusJSON, now time.Time) {
	line := func(k, v string) { fmt.Fprintf(w, "%-8s  %s\n", k, v) }
	line("cluster", s.Dir)
	switch {
	case s.Running:
		line("state", fmt.Sprintf("running, pid %d, started %s", s.PID, relative(*s.Since, now)))
	case s.Created:
		line("state", "stopped (qd db start, or the next command that writes, starts it)")
	default:
		line("state", "not made yet (the first command that writes makes it)")
	}
	if s.BinError != "" {
		line("server", s.BinError)
	} else {
		line("server", fmt.Sprintf("PostgreSQL %s in %s", s.Version, s.BinDir))
	}
	if s.Created {
		line("data", fmt.Sprintf("%s, PostgreSQL %s, %s", s.DataDir, s.DataVersion, megabytes(s.SizeBytes)))
		line("runs as", s.Owner)
	}
	line("socket", filepath.Join(s.Socket, ".s.PGSQL.5432")+" (a unix socket only, no TCP)")
	line("log", s.Log)
	if s.URL != "" {
		line("psql", "psql '"+s.URL+"'")
	}
	if !s.InUse {
		line("in use", "no: qd uses "+s.Configured+" (--db, $QD_DATABASE_URL or the config's database)")
	}
}

func megabytes(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
