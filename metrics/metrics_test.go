package metrics_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
	"github.com/qd-run/qd/metrics"
)

// MustScrape gets h's exposition and parses it.
func MustScrape(tb testing.TB, h http.Handler) testkit.Scrape {
	tb.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != http.StatusOK {
		tb.Fatalf("scrape: status %d: %s", rec.Code, rec.Body)
	}
	s, err := testkit.ParseMetrics(strings.NewReader(rec.Body.String()))
	if err != nil {
		tb.Fatalf("%v\n%s", err, rec.Body)
	}
	return s
}

// MustValue is the value of one series, failing when it is missing.
func MustValue(tb testing.TB, s testkit.Scrape, name string, labels ...string) float64 {
	tb.Helper()
	v, ok := s.Value(name, labels...)
	if !ok {
		tb.Fatalf("no series %s%v in the scrape", name, labels)
	}
	return v
}

// allowed are the label names qd's families may carry.
var allowed = []string{"agent", "go_version", "lane", "le", "outcome", "reason", "version"}

func checkLabels(t *testing.T, s testkit.Scrape) {
	t.Helper()
	for _, n := range s.LabelNames("qd_") {
		if !slices.Contains(allowed, n) {
			t.Errorf("label %q on a qd_ series; only %v are allowed", n, allowed)
		}
	}
}

// Ensure the dashboard's exposition shows the queue's lanes as they are:
// queued, running, the limit, a pause and the oldest task's age, with the
// build info and the Go runtime's series beside them.
func TestForQueue(t *testing.T) {
	ctx := context.Background()
	q := memlease.New()
	defer q.Close()
	two, paused := 2, true
	if _, err := q.SetLane(ctx, lease.LaneUpdate{Name: "mail", MaxRunning: &two}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.SetLane(ctx, lease.LaneUpdate{Name: "idle", Paused: &paused}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: "mail", Agent: "send"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := q.Claim(ctx, lease.ClaimParams{Lanes: []string{"mail"}, Owner: "t"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	s := MustScrape(t, metrics.ForQueue(q, "1.2.3"))
	for _, c := range []struct {
		name, lane string
		want       float64
	}{
		{"qd_lane_queued_tasks", "mail", 2},
		{"qd_lane_running_runs", "mail", 1},
		{"qd_lane_max_running", "mail", 2},
		{"qd_lane_paused", "mail", 0},
		{"qd_lane_paused", "idle", 1},
		{"qd_lane_queued_tasks", "idle", 0},
		{"qd_lane_oldest_queued_age_seconds", "idle", 0},
	} {
		if got := MustValue(t, s, c.name, "lane", c.lane); got != c.want {
			t.Errorf("%s{lane=%q} = %v, want %v", c.name, c.lane, got, c.want)
		}
	}
	if age := MustValue(t, s, "qd_lane_oldest_queued_age_seconds", "lane", "mail"); age < 0.01 || age > 60 {
		t.Errorf("oldest queued age %v s, want the few milliseconds since the enqueue", age)
	}
	if got := MustValue(t, s, "qd_build_info", "version", "1.2.3"); got != 1 {
		t.Errorf("qd_build_info = %v, want 1", got)
	}
	if got := MustValue(t, s, "qd_queue_up"); got != 1 {
		t.Errorf("qd_queue_up = %v, want 1", got)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		MustValue(t, s, name)
	}
	if _, ok := s["qd_runs_started_total"]; ok {
		t.Error("the queue's exposition has the daemon's run counters")
	}
	checkLabels(t, s)
}

// downQueue is a queue whose database does not answer.
type downQueue struct{ lease.Provider }

func (downQueue) Lanes(context.Context) ([]lease.Lane, error) {
	return nil, errors.New("dial tcp 127.0.0.1:5432: connection refused")
}

// Ensure a queue that cannot answer gives qd_queue_up 0 and a scrape that
// still succeeds, without lane series.
func TestForQueue_Down(t *testing.T) {
	q := downQueue{memlease.New()}
	s := MustScrape(t, metrics.ForQueue(q, ""))
	if got := MustValue(t, s, "qd_queue_up"); got != 0 {
		t.Errorf("qd_queue_up = %v, want 0", got)
	}
	if _, ok := s["qd_lane_queued_tasks"]; ok {
		t.Error("lane series from a queue that did not answer")
	}
	if _, ok := s.Value("qd_build_info"); !ok {
		t.Error("no qd_build_info")
	}
}

// Ensure each event the daemon reports moves its series, with only the
// agent, lane, outcome and reason labels.
func TestMetrics_Events(t *testing.T) {
	m := metrics.New(metrics.Options{Version: "v", Queue: memlease.New(),
		Children: func() map[string]int { return map[string]int{"send": 2, "idle": 0} }})
	m.Claimed("send", 2, 3*time.Millisecond, nil)
	m.Claimed("send", 0, time.Millisecond, nil)
	m.Claimed("send", 0, time.Second, errors.New("connection refused"))
	m.RunStarted("send", "mail", 1500*time.Millisecond)
	m.RunStarted("send", "mail", -1)
	m.QueueWait("send", "mail", 2*time.Second)
	m.RunEnded("send", "mail", lease.RunCompleted, "", 2*time.Second)
	m.RunEnded("send", "mail", lease.RunAbandoned, "timeout", 5*time.Second)
	m.RunEnded("send", "mail", lease.RunAbandoned, "lease lost", time.Second)
	m.Heartbeat(4*time.Millisecond, nil)
	m.Heartbeat(time.Second, errors.New("timeout"))
	m.LoopPass()
	m.LoopPass()
	m.SettleFailed()
	m.Reloaded(true)
	m.Reloaded(false)
	s := MustScrape(t, m.Handler())
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qd_claims_total", []string{"agent", "send", "outcome", "claimed"}, 1},
		{"qd_claims_total", []string{"agent", "send", "outcome", "empty"}, 1},
		{"qd_claims_total", []string{"agent", "send", "outcome", "error"}, 1},
		{"qd_claim_duration_seconds", []string{"agent", "send"}, 3},
		{"qd_runs_started_total", []string{"agent", "send", "lane", "mail"}, 2},
		{"qd_queue_wait_seconds", []string{"lane", "mail"}, 2},
		{"qd_runs_finished_total", []string{"outcome", "completed"}, 1},
		{"qd_runs_finished_total", []string{"outcome", "abandoned"}, 2},
		{"qd_runs_finished_total", []string{"outcome", "failed"}, 0},
		{"qd_run_duration_seconds", []string{"agent", "send"}, 3},
		{"qd_run_kills_total", []string{"reason", "timeout"}, 1},
		{"qd_run_kills_total", []string{"reason", "lease_lost"}, 1},
		{"qd_heartbeat_duration_seconds", nil, 2},
		{"qd_heartbeat_loop_passes_total", nil, 2},
		{"qd_database_errors_total", []string{"reason", "claim"}, 1},
		{"qd_database_errors_total", []string{"reason", "heartbeat"}, 1},
		{"qd_database_errors_total", []string{"reason", "settle"}, 1},
		{"qd_database_errors_total", []string{"reason", "lanes"}, 0},
		{"qd_config_reloads_total", []string{"outcome", "success"}, 1},
		{"qd_config_reloads_total", []string{"outcome", "failure"}, 1},
		{"qd_config_last_reload_successful", nil, 0},
		{"qd_agent_children", []string{"agent", "send"}, 2},
		{"qd_agent_children", []string{"agent", "idle"}, 0},
		{"qd_queue_up", nil, 1},
	} {
		if got := MustValue(t, s, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := s.Sum("qd_run_duration_seconds", "outcome", "abandoned"); got != 6 {
		t.Errorf("abandoned runs' duration sum %v s, want 6", got)
	}
	checkLabels(t, s)
}

// Ensure the events are safe to report from many goroutines while scrapes
// go on (run with -race).
func TestMetrics_Concurrent(t *testing.T) {
	m := metrics.New(metrics.Options{})
	done := make(chan struct{})
	for g := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			agent := []string{"a", "b"}[g%2]
			for range 500 {
				m.Claimed(agent, 1, time.Millisecond, nil)
				m.RunStarted(agent, "l", 0)
				m.RunEnded(agent, "l", lease.RunCompleted, "", time.Millisecond)
			}
		}()
	}
	for range 5 {
		MustScrape(t, m.Handler())
	}
	for range 4 {
		<-done
	}
	s := MustScrape(t, m.Handler())
	if got := MustValue(t, s, "qd_runs_finished_total", "outcome", "completed"); got != 2000 {
		t.Errorf("runs finished %v, want 2000", got)
	}
}

// Ensure resolving an event's series costs no allocation once the agent
// and lane have been seen.
func TestMetrics_NoAllocs(t *testing.T) {
	m := metrics.New(metrics.Options{})
	m.RunStarted("a", "l", 0)
	m.Claimed("a", 1, 0, nil)
	n := testing.AllocsPerRun(200, func() {
		m.Claimed("a", 1, time.Millisecond, nil)
		m.RunStarted("a", "l", time.Millisecond)
		m.RunEnded("a", "l", lease.RunCompleted, "", time.Millisecond)
		m.Heartbeat(time.Millisecond, nil)
		m.LoopPass()
	})
	if n > 0 {
		t.Errorf("%v allocations per event round, want 0", n)
	}
}

// BenchmarkMetrics_Events is one run's worth of events: a claim, a start,
// an end and a heartbeat.
func BenchmarkMetrics_Events(b *testing.B) {
	m := metrics.New(metrics.Options{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			m.Claimed("a", 1, time.Millisecond, nil)
			m.RunStarted("a", "l", time.Millisecond)
			m.RunEnded("a", "l", lease.RunCompleted, "", time.Second)
			m.Heartbeat(time.Millisecond, nil)
		}
	})
}

// BenchmarkMetrics_Scrape is a scrape of a daemon with 20 agents over 100
// lanes, every series present, the lanes read from a queue in memory.
func BenchmarkMetrics_Scrape(b *testing.B) {
	ctx := context.Background()
	q := memlease.New()
	defer q.Close()
	m := metrics.New(metrics.Options{Queue: q})
	for i := range 100 {
		lane := fmt.Sprintf("lane-%d", i)
		if _, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: lane, Agent: "a"}); err != nil {
			b.Fatal(err)
		}
		agent := fmt.Sprintf("agent-%d", i%20)
		m.Claimed(agent, 1, time.Millisecond, nil)
		m.RunStarted(agent, lane, time.Second)
		for _, o := range []lease.RunState{lease.RunCompleted, lease.RunFailed, lease.RunAbandoned, lease.RunCancelled} {
			m.RunEnded(agent, lane, o, "", time.Second)
		}
	}
	h := m.Handler()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		if rec.Code != http.StatusOK {
			b.Fatal(rec.Code)
		}
		b.SetBytes(int64(rec.Body.Len()))
	}
}
