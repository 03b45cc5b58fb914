package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/bench"
)

const usage = "qdbench [--db URL] [--size small|full] [--duration D] [--only PARTS] [--children N] [--out FILE] [--json] [--qd BINARY] [--river DIR]"

const help = `Measures claims, batch claims, claim-to-complete cycles, heartbeats, claim
latency with a deep queue and a long history, and a heartbeat soak, each as a
figure and as a ratio to the minimal SKIP LOCKED claim measured in the same
run; then tasks/s through a qd daemon (qd run, with --qd's binary) with real
children against a plain fork-exec loop and River (built from --river's
module with the go command, left out when it cannot be), the idle cost of a daemon with
50 agents and of one on its private cluster, what a fleet of daemons, each with
live children, costs the database as it grows (on a private cluster of its
own), and one daemon holding many live children (--children). It works in schemas and databases of its own (qd_bench_*), which
it drops when it ends; it never touches the queue's schema. It needs a role
that may create databases. --size small takes seconds; --size full uses a
million queued and ten million finished tasks and takes minutes. Progress
goes to stderr, the tables (or JSON with --json) to stdout; --out also writes
the JSON report to FILE. See docs/performance.md.`

// Env is what qdbench uses of the outside world.
type Env struct {
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// Executable is this program's path: the qd beside it is the default
	// daemon.
	Executable string
}

func main() {
	exe, _ := os.Executable()
	env := &Env{Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv, Executable: exe}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := Run(ctx, os.Args[1:], env)
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "qdbench: %s\n", err)
	}
	os.Exit(exitCode(err))
}

// Command holds qdbench's flags.
type Command struct {
	DatabaseURL string
	Size        string
	Duration    time.Duration
	Out         string
	JSON        bool
	QD          string
	River       string
	Only        string
	only        []string
	Children    int
}

// flagSet binds the fields of c to their flags.
func (c *Command) flagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("qdbench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.DatabaseURL, "db", "", "database `URL` (default: $QD_DATABASE_URL; one of them is required)")
	fs.StringVar(&c.Size, "size", "small", "bench `SIZE`: "+strings.Join(bench.Sizes(), " or "))
	fs.Var(durationValue{&c.Duration}, "duration", "length of each timed measurement (default: the size's)")
	fs.StringVar(&c.Out, "out", "", "also write the JSON report to `FILE`")
	fs.BoolVar(&c.JSON, "json", false, "print the report as JSON instead of tables")
	fs.StringVar(&c.River, "river", "", "`DIR` of the River peer's module, built with go build (default: bench/river under the working directory)")
	fs.StringVar(&c.Only, "only", "", "comma-separated `PARTS` to run: "+strings.Join(bench.Parts(), ", ")+" (default: all)")
	fs.IntVar(&c.Children, "children", 0, "live children `N` of the children part (default: 500 small, 10,000 full)")
	fs.StringVar(&c.QD, "qd", "", "qd `BINARY` to run as the daemon (default: the qd next to qdbench, then qd in PATH)")
	return fs
}

// Run parses args, finds the qd binary and runs the bench. Bad usage is
// refused before anything runs.
func Run(ctx context.Context, args []string, env *Env) error {
	var c Command
	fs := c.flagSet()
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeHelp(env.Stdout, fs)
			return nil
		}
		return usageErrorf("%s", dashdash(err.Error()))
	}
	if fs.NArg() > 0 {
		return usageErrorf("unexpected argument %q", fs.Arg(0))
	}
	if !slices.Contains(bench.Sizes(), c.Size) {
		return usageErrorf("--size %q: want %s", c.Size, strings.Join(bench.Sizes(), " or "))
	}
	var only []string
	if c.Only != "" {
		for _, p := range strings.Split(c.Only, ",") {
			if p = strings.TrimSpace(p); !slices.Contains(bench.Parts(), p) {
				return usageErrorf("--only %q: want parts among %s", p, strings.Join(bench.Parts(), ", "))
			}
			only = append(only, strings.TrimSpace(p))
		}
	}
	c.only = only
	if c.Children < 0 {
		return usageErrorf("--children %d: want a positive number of children", c.Children)
	}
	qd, err := findQD(c.QD, env.Executable)
	if err != nil {
		return err
	}
	if c.DatabaseURL == "" {
		c.DatabaseURL = env.Getenv("QD_DATABASE_URL")
	}
	if c.DatabaseURL == "" {
		return usageErrorf("no database to measure in: give --db URL or set QD_DATABASE_URL (qdbench creates and drops databases, so it never falls back to qd's private cluster)")
	}
	return c.run(ctx, env, qd)
}

// run runs the bench with the daemon binary qd and prints the report, also
// the part measured before an error.
func (c *Command) run(ctx context.Context, env *Env, qd string) error {
	url := c.DatabaseURL
	logger := hclog.New(&hclog.LoggerOptions{Output: env.Stderr, Level: hclog.Info})
	logger.Info("daemon binary", "path", qd)
	r, runErr := bench.Run(ctx, bench.Options{DatabaseURL: url, Size: c.Size, Duration: c.Duration, Logger: logger, QD: qd, River: c.River, Only: c.only, Children: c.Children})
	if r == nil {
		return runErr
	}
	if err := c.write(env.Stdout, r); err != nil {
		return err
	}
	return runErr
}

// write prints the report and writes its JSON to --out when given.
func (c *Command) write(w io.Writer, r *bench.Report) error {
	if c.Out != "" {
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			return err
		}
		if err := os.WriteFile(c.Out, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write bench report: %w", err)
		}
	}
	if c.JSON {
		return r.WriteJSON(w)
	}
	return r.WriteText(w)
}
