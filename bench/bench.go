package bench

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// runner carries one bench run.
type runner struct {
	o    Options
	sc   scale
	log  hclog.Logger
	id   string
	r    *Report
	base map[int]Figure // baseline claims/s by concurrency
	// oldestSnapshot is the age in seconds of the oldest snapshot another
	// session held during the soak.
	oldestSnapshot float64
	rivers         int      // River databases made so far
	cleanup        []func() // run when Run returns
}

// Run measures the queue against the database of o.DatabaseURL and returns
// the report. It creates schemas named qd_bench_<random>_<part> and drops
// them before it returns. On error it returns the sections measured so far
// with the error.
func Run(ctx context.Context, o Options) (*Report, error) {
	sc, err := o.scale()
	if err != nil {
		return nil, err
	}
	logger := o.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	id := o.ID
	if id == "" {
		id = newRunID()
	}
	b := &runner{o: o, sc: sc, log: logger.Named("bench"), id: id, base: map[int]Figure{}}
	b.r = &Report{Size: sc.Name, Started: time.Now()}
	defer func() {
		for _, f := range b.cleanup {
			f()
		}
	}()
	steps := []struct {
		name string
		fn   func(context.Context) error
	}{
		{"environment", b.environment},
		{"claims", b.claims},
		{"heartbeats", b.heartbeats},
		{"depth", b.depth},
		{"history", b.history},
		{"soak", b.soak},
		{"e2e", b.e2e},
		{"idle", b.idle},
		{"fleet", b.fleet},
		{"children", b.children},
	}
	for _, s := range steps {
		if s.name != "environment" && len(o.Only) > 0 && !slices.Contains(o.Only, s.name) {
			continue
		}
		b.log.Info("bench step", "step", s.name)
		if err := s.fn(ctx); err != nil {
			b.r.Seconds = time.Since(b.r.Started).Seconds()
			return b.r, fmt.Errorf("bench %s: %w", s.name, err)
		}
	}
	b.r.Seconds = time.Since(b.r.Started).Seconds()
	b.r.Environment.LoadAfter = loadAverage()
	return b.r, nil
}

// open creates the schema of one part of the bench.
func (b *runner) open(ctx context.Context, part string, lanes int) (*fixture, error) {
	return openFixture(ctx, b.o.DatabaseURL, "qd_bench_"+b.id+"_"+part, lanes, b.log)
}

// environment records the server and machine the figures come from.
func (b *runner) environment(ctx context.Context) error {
	f, err := b.open(ctx, "env", 0)
	if err != nil {
		return err
	}
	defer f.close(ctx)
	e := &b.r.Environment
	err = f.pool().QueryRow(ctx, `SELECT current_setting('server_version'), current_setting('synchronous_commit'),
		current_setting('shared_buffers'), current_setting('autovacuum')`).
		Scan(&e.Postgres, &e.SynchronousCommit, &e.SharedBuffers, &e.Autovacuum)
	if err != nil {
		return fmt.Errorf("read server settings: %w", err)
	}
	e.Postgres = "PostgreSQL " + e.Postgres
	e.CPUs = runtime.NumCPU()
	e.GoVersion = runtime.Version()
	e.MeasureSeconds = b.sc.Measure.Seconds()
	e.LoadBefore = loadAverage()
	return nil
}

// loadAverage returns the 1, 5 and 15 minute load averages of the machine,
// or "" where /proc/loadavg does not exist.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
