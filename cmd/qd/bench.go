package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/bench"
)

var benchCommand = &command{
	name:    "bench",
	summary: "measure the queue against the minimal SKIP LOCKED claim",
	usage:   "[--size small|full] [--duration D] [--out FILE] [--json]",
	help: `Measures claims, batch claims, claim-to-complete cycles, heartbeats, claim
latency with a deep queue and a long history, and a heartbeat soak, each as a
figure and as a ratio to the minimal SKIP LOCKED claim measured in the same run;
then tasks/s through a daemon (this binary's qd run) with real children against
a plain fork-exec loop, and the idle cost of a daemon with 50 agents. It works
in schemas and databases of its own (qd_bench_*), which it drops when it ends;
it never touches the queue's schema. It needs a role that may create databases. --size small takes seconds; --size full uses
a million queued and ten million finished tasks and takes minutes. Progress goes
to stderr, the table (or JSON with --json) to stdout; --out also writes the JSON
report to FILE. See docs/performance.md.`,
	db:    true,
	json:  true,
	setup: setupBench,
}

func setupBench(fs *flag.FlagSet) runFunc {
	size := fs.String("size", "small", "bench `SIZE`: "+strings.Join(bench.Sizes(), " or "))
	dur := durationFlag(fs, "duration", 0, "length of each timed measurement (default: the size's)")
	out := fs.String("out", "", "also write the JSON report to `FILE`")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if !slices.Contains(bench.Sizes(), *size) {
			return usageErrorf("bench: --size %q: want %s", *size, strings.Join(bench.Sizes(), " or "))
		}
		raw, err := env.URL()
		if err != nil {
			return err
		}
		logger := hclog.New(&hclog.LoggerOptions{Name: "qd", Output: env.Stderr, Level: hclog.Info})
		r, runErr := bench.Run(ctx, bench.Options{DatabaseURL: raw, Size: *size, Duration: *dur, Logger: logger})
		if r == nil {
			return runErr
		}
		if err := writeBench(env, r, *out); err != nil {
			return err
		}
		return runErr
	}
}

// writeBench prints the report and writes its JSON to path when one is given.
func writeBench(env *Env, r *bench.Report, path string) error {
	if path != "" {
		var b bytes.Buffer
		if err := r.WriteJSON(&b); err != nil {
			return err
		}
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("write bench report: %w", err)
		}
	}
	if env.JSON {
		return r.WriteJSON(env.Stdout)
	}
	return r.WriteText(env.Stdout)
}
