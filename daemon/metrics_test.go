package daemon

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// MustPG opens a provider on a fresh, migrated schema of the test database.
func MustPG(tb testing.TB) *pg.Provider {
	tb.Helper()
	u, _ := testkit.MustSchema(tb)
	ctx := context.Background()
	p, err := pg.Open(ctx, u, hclog.NewNullLogger())
	if err != nil {
		tb.Fatalf("pg.Open: %v", err)
	}
	tb.Cleanup(p.Close)
	if err := p.Migrate(ctx); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	return p
}

// scrape reads the daemon's metrics through its socket.
func (td *testDaemon) scrape() testkit.Scrape {
	td.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	text, err := td.api.Metrics(ctx)
	if err != nil {
		td.t.Fatalf("scrape: %v", err)
	}
	s, err := testkit.ParseMetrics(bytes.NewReader(text))
	if err != nil {
		td.t.Fatal(err)
	}
	return s
}

// waitMetric scrapes until the series' value is at least want, and returns
// the last scrape.
func (td *testDaemon) waitMetric(want float64, name string, labels ...string) testkit.Scrape {
	td.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		s := td.scrape()
		if v, _ := s.Value(name, labels...); v >= want {
			return s
		}
		if time.Now().After(deadline) {
			v, ok := s.Value(name, labels...)
			td.t.Fatalf("%s%v never reached %v: last %v (present %v)", name, labels, want, v, ok)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

const metricsAgents = `
agent "ok" {
  command  = ["/bin/sh", "-c", "sleep 0.2; echo done"]
  schedule = "@every 1s"
  lanes    = ["work"]
  parallel = 2
}
agent "slow" {
  command    = ["/bin/sleep", "30"]
  schedule   = "@every 1s"
  lanes      = ["slow"]
  lease      = "3s"
  timeout    = "2s"
  kill_grace = "1s"
}
agent "bad" {
  command  = ["/bin/false"]
  schedule = "@every 1s"
  lanes    = ["bad"]
}
`

// Ensure the socket's metrics move with real runs on PostgreSQL: runs
// started and finished by outcome, the duration and queue wait histograms,
// a timeout counted as a kill, claims and heartbeats, the lane gauges of a
// paused lane, children per agent, reloads and build info; and that no
// series carries a task or run id.
func TestDaemon_Metrics(t *testing.T) {
	q := MustPG(t)
	ctx := context.Background()
	paused := true
	if _, err := q.SetLane(ctx, lease.LaneUpdate{Name: "held", Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	enqueue := func(lane, agent string) {
		if _, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: lane, Agent: agent, MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		enqueue("work", "ok")
	}
	enqueue("slow", "slow")
	enqueue("bad", "bad")
	enqueue("held", "ok")
	enqueue("held", "ok")
	td := MustStart(t, q, "m1", "", metricsAgents)

	s := td.waitMetric(1, "qd_agent_children", "agent", "slow")
	if v, _ := s.Value("qd_lane_running_runs", "lane", "slow"); v != 1 {
		t.Errorf("qd_lane_running_runs{lane=slow} = %v while its run lives, want 1", v)
	}
	td.waitMetric(3, "qd_runs_finished_total", "agent", "ok", "lane", "work", "outcome", "completed")
	td.waitMetric(1, "qd_runs_finished_total", "agent", "bad", "outcome", "failed")
	td.waitMetric(1, "qd_run_kills_total", "agent", "slow", "reason", "timeout")
	td.waitMetric(3, "qd_queue_wait_seconds", "agent", "ok", "lane", "work")
	s = td.waitMetric(1, "qd_claims_total", "agent", "ok", "outcome", "empty")

	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qd_runs_started_total", []string{"agent", "ok", "lane", "work"}, 3},
		{"qd_runs_started_total", []string{"agent", "slow"}, 1},
		{"qd_runs_finished_total", []string{"agent", "slow", "outcome", "abandoned"}, 1},
		{"qd_runs_finished_total", []string{"agent", "ok", "outcome", "failed"}, 0},
		{"qd_run_duration_seconds", []string{"agent", "ok", "outcome", "completed"}, 3},
		{"qd_run_kills_total", []string{"reason", "timeout"}, 1},
		{"qd_lane_queued_tasks", []string{"lane", "held"}, 2},
		{"qd_lane_paused", []string{"lane", "held"}, 1},
		{"qd_lane_queued_tasks", []string{"lane", "work"}, 0},
		{"qd_lane_running_runs", []string{"lane", "slow"}, 0},
		{"qd_agent_children", []string{"agent", "slow"}, 0},
		{"qd_agent_children", []string{"agent", "bad"}, 0},
		{"qd_queue_up", nil, 1},
		{"qd_build_info", []string{"version", "test"}, 1},
		{"qd_database_errors_total", nil, 0},
	}
	for _, c := range checks {
		if got, ok := s.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// Every claim and settlement above is a transaction: 4 runs claimed and
	// settled, and the empty claims.
	if tx, ok := s.Value("qd_database_transactions_total"); !ok || tx < 8 {
		t.Errorf("qd_database_transactions_total = %v (present %v) after 4 runs, want at least 8", tx, ok)
	}
	if sum := s.Sum("qd_run_duration_seconds", "agent", "slow"); sum < 2 || sum > 10 {
		t.Errorf("the timed-out run lasted %v s by the histogram, want its 2s timeout and the grace", sum)
	}
	if sum := s.Sum("qd_run_duration_seconds", "agent", "ok"); sum < 0.6 {
		t.Errorf("three runs of 0.2s sum to %v s by the histogram", sum)
	}
	if sum := s.Sum("qd_queue_wait_seconds", "agent", "ok"); sum < 0 || sum > 60 {
		t.Errorf("three tasks enqueued just before the daemon started waited %v s in all by the histogram", sum)
	} else {
		t.Logf("queue wait of the three tasks: %.3f s in all", sum)
	}
	if age, _ := s.Value("qd_lane_oldest_queued_age_seconds", "lane", "held"); age <= 0 {
		t.Errorf("oldest queued age in the paused lane %v, want above 0", age)
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"qd_claims_total", []string{"agent", "ok", "outcome", "claimed"}},
		{"qd_claims_total", []string{"agent", "ok", "outcome", "empty"}},
		{"qd_claim_duration_seconds", []string{"agent", "ok"}},
		{"qd_heartbeat_duration_seconds", nil},
		{"qd_heartbeat_loop_passes_total", nil},
	} {
		if got, _ := s.Value(c.name, c.labels...); got < 1 {
			t.Errorf("%s%v = %v, want at least 1", c.name, c.labels, got)
		}
	}

	began := time.Now()
	const scrapes = 20
	for range scrapes {
		td.scrape()
	}
	t.Logf("a scrape through the socket, lanes read from PostgreSQL: %s", time.Since(began)/scrapes)

	td.reload("m1", metricsAgents)
	s = td.waitMetric(1, "qd_config_reloads_total", "outcome", "success")
	if v, _ := s.Value("qd_config_last_reload_successful"); v != 1 {
		t.Errorf("qd_config_last_reload_successful = %v after a good reload", v)
	}
	td.write("m1", metricsAgents+"agent \"x\" {\n  comand = []\n}\n")
	td.sigs <- syscall.SIGHUP
	s = td.waitMetric(1, "qd_config_reloads_total", "outcome", "failure")
	if v, _ := s.Value("qd_config_last_reload_successful"); v != 0 {
		t.Errorf("qd_config_last_reload_successful = %v after a refused reload", v)
	}

	allowed := []string{"agent", "go_version", "lane", "le", "outcome", "reason", "version"}
	for _, n := range s.LabelNames("qd_") {
		if !slices.Contains(allowed, n) {
			t.Errorf("label %q on a qd_ series", n)
		}
	}
	for name, f := range s {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "le" || l.GetName() == "quantile" {
					continue
				}
				if _, err := strconv.ParseInt(l.GetValue(), 10, 64); err == nil {
					t.Errorf("%s has the numeric label %s=%q, an id perhaps", name, l.GetName(), l.GetValue())
				}
			}
		}
	}
}

// failingBeats is a queue whose heartbeats fail: each run's lease refused
// as lost, or the whole call failed as by a database out of reach.
type failingBeats struct {
	*pg.Provider
	whole bool
}

func (q failingBeats) Heartbeat(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
	if q.whole {
		return nil, errors.New("dial tcp 127.0.0.1:5432: connection refused")
	}
	out := make([]lease.BeatResult, len(beats))
	for i, b := range beats {
		out[i] = lease.BeatResult{RunID: b.RunID, Err: fmt.Errorf("run %d: %w", b.RunID, lease.ErrLeaseLost)}
	}
	return out, nil
}

// Ensure a refused heartbeat counts as a lease_lost kill, and heartbeats
// that cannot reach the database count as database errors and, once the
// local deadline passes, a fenced kill.
func TestDaemon_MetricsLeaseKills(t *testing.T) {
	for _, c := range []struct {
		name   string
		whole  bool
		reason string
	}{
		{"LeaseLost", false, "lease_lost"},
		{"Fenced", true, "fenced"},
	} {
		t.Run(c.name, func(t *testing.T) {
			q := MustPG(t)
			if _, _, err := q.Enqueue(context.Background(), lease.EnqueueParams{Lane: "l", Agent: "hold", MaxAttempts: 1}); err != nil {
				t.Fatal(err)
			}
			td := MustStart(t, failingBeats{q, c.whole}, "k1", "", `
agent "hold" {
  command    = ["/bin/sleep", "30"]
  schedule   = "@every 1s"
  lanes      = ["l"]
  lease      = "2s"
  kill_grace = "1s"
}`)
			s := td.waitMetric(1, "qd_run_kills_total", "agent", "hold", "reason", c.reason)
			if v, _ := s.Value("qd_runs_finished_total", "agent", "hold", "outcome", "abandoned"); v != 1 {
				t.Errorf("qd_runs_finished_total{outcome=abandoned} = %v, want 1", v)
			}
			errs, _ := s.Value("qd_database_errors_total", "reason", "heartbeat")
			switch {
			case c.whole && errs < 1:
				t.Errorf("qd_database_errors_total{reason=heartbeat} = %v after failed heartbeats, want at least 1", errs)
			case !c.whole && errs != 0:
				t.Errorf("qd_database_errors_total{reason=heartbeat} = %v for refused leases, want 0: the database answered", errs)
			}
		})
	}
}
