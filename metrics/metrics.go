package metrics

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qd-run/qd/lease"
)

// Options configures a daemon's Metrics.
type Options struct {
	// Version is qd's version for qd_build_info (empty: "unknown").
	Version string
	// Queue is read at each scrape for the lane gauges; nil leaves them out.
	Queue lease.Provider
	// Children, when set, is called at each scrape for the children this
	// process runs, by agent (configured agents with none included, as 0).
	Children func() map[string]int
	// Transactions, when set, is called at each scrape for how many
	// transactions this process has sent to the database.
	Transactions func() int64
}

// Buckets of the histograms, in seconds.
var (
	runBuckets     = []float64{0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600}
	waitBuckets    = []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	latencyBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}
)

// Claim results, the outcome label of qd_claims_total.
const (
	ClaimClaimed = "claimed"
	ClaimEmpty   = "empty"
	ClaimError   = "error"
)

// outcomes are the run outcomes whose series are resolved once per agent
// and lane; any other goes through the vector.
var outcomes = [...]lease.RunState{lease.RunCompleted, lease.RunFailed, lease.RunAbandoned, lease.RunCancelled}

// Metrics is a daemon's exposition. Its methods are safe for concurrent use
// and cheap: each agent's and lane's series are resolved once, then kept.
type Metrics struct {
	reg *prometheus.Registry

	claims        *prometheus.CounterVec   // agent, outcome
	claimLatency  *prometheus.HistogramVec // agent
	started       *prometheus.CounterVec   // agent, lane
	finished      *prometheus.CounterVec   // agent, lane, outcome
	duration      *prometheus.HistogramVec // agent, lane, outcome
	wait          *prometheus.HistogramVec // agent, lane
	kills         *prometheus.CounterVec   // agent, reason
	beatLatency   prometheus.Histogram
	beatErrors    prometheus.Counter // qd_database_errors_total{reason="heartbeat"}
	passes        prometheus.Counter
	dbErrors      *prometheus.CounterVec // reason
	reloads       *prometheus.CounterVec // outcome
	reloadOK      prometheus.Gauge
	reloadSuccess prometheus.Counter
	reloadFailure prometheus.Counter

	agents sync.Map // agent name → *agentSeries
	runs   sync.Map // runKey → *runSeries
}

type agentSeries struct {
	claimed, empty, failed prometheus.Counter
	latency                prometheus.Observer
}

type runKey struct{ agent, lane string }

type runSeries struct {
	started  prometheus.Counter
	wait     prometheus.Observer
	finished [len(outcomes)]prometheus.Counter
	// duration is made at an outcome's first run: a histogram is a score
	// of series, not worth having for outcomes an agent never has.
	duration [len(outcomes)]atomic.Pointer[prometheus.Observer]
}

// New makes a daemon's Metrics on a private registry.
func New(o Options) *Metrics {
	m := &Metrics{
		reg: newRegistry(o.Version),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qd_claims_total",
			Help: "Claim calls for an agent, by outcome: claimed (one or more runs), empty (nothing eligible) or error."},
			[]string{"agent", "outcome"}),
		claimLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "qd_claim_duration_seconds",
			Help: "Time a claim call for an agent took, whatever its outcome.", Buckets: latencyBuckets},
			[]string{"agent"}),
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qd_runs_started_total",
			Help: "Runs this daemon claimed and handed to a child."}, []string{"agent", "lane"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qd_runs_finished_total",
			Help: "Runs of this daemon that ended, by outcome: completed, failed, abandoned or cancelled."},
			[]string{"agent", "lane", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "qd_run_duration_seconds",
			Help: "Time from a run's claim to its end, by outcome.", Buckets: runBuckets},
			[]string{"agent", "lane", "outcome"}),
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "qd_queue_wait_seconds",
			Help: "Time a task waited to start once it was due: from its run_after to its run's claim.", Buckets: waitBuckets},
			[]string{"agent", "lane"}),
		kills: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qd_run_kills_total",
			Help: "Children this daemon stopped, by reason: timeout, stall, cancel, shutdown, lease_lost or fenced."},
			[]string{"agent", "reason"}),
		beatLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "qd_heartbeat_duration_seconds",
			Help: "Time one batched heartbeat call took.", Buckets: latencyBuckets}),
		passes: prometheus.NewCounter(prometheus.CounterOpts{Name: "qd_heartbeat_loop_passes_total",
			Help: "Passes of the heartbeat loop, at least one a second while the daemon is healthy, runs or none."}),
		dbErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qd_database_errors_total",
			Help: "Calls to the queue that failed, by reason: claim, heartbeat, settle or lanes."}, []string{"reason"}),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "qd_config_reloads_total",
			Help: "Config reloads (SIGHUP, systemctl reload), by outcome: success or failure."}, []string{"outcome"}),
		reloadOK: prometheus.NewGauge(prometheus.GaugeOpts{Name: "qd_config_last_reload_successful",
			Help: "1 when the last config reload took (or none was tried), 0 when it was refused."}),
	}
	m.reloadSuccess = m.reloads.WithLabelValues("success")
	m.reloadFailure = m.reloads.WithLabelValues("failure")
	m.reloadOK.Set(1)
	for _, r := range []string{"claim", "heartbeat", "settle", "lanes"} {
		m.dbErrors.WithLabelValues(r)
	}
	m.beatErrors = m.dbErrors.WithLabelValues("heartbeat")
	m.reg.MustRegister(m.claims, m.claimLatency, m.started, m.finished, m.duration, m.wait, m.kills,
		m.beatLatency, m.passes, m.dbErrors, m.reloads, m.reloadOK)
	if o.Queue != nil {
		lanesErr := m.dbErrors.WithLabelValues("lanes")
		m.reg.MustRegister(&laneCollector{queue: o.Queue, timeout: LanesTimeout,
			onError: func(error) { lanesErr.Inc() }}, &spendCollector{queue: o.Queue, timeout: LanesTimeout})
	}
	if o.Children != nil {
		m.reg.MustRegister(childCollector(o.Children))
	}
	if o.Transactions != nil {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "qd_database_transactions_total",
			Help: "Transactions this daemon sent to the database, committed or not."},
			func() float64 { return float64(o.Transactions()) }))
	}
	return m
}

// Handler serves the exposition in Prometheus' text format.
func (m *Metrics) Handler() http.Handler { return handler(m.reg) }

func (m *Metrics) agent(name string) *agentSeries {
	if s, ok := m.agents.Load(name); ok {
		return s.(*agentSeries)
	}
	s := &agentSeries{
		claimed: m.claims.WithLabelValues(name, ClaimClaimed),
		empty:   m.claims.WithLabelValues(name, ClaimEmpty),
		failed:  m.claims.WithLabelValues(name, ClaimError),
		latency: m.claimLatency.WithLabelValues(name),
	}
	got, _ := m.agents.LoadOrStore(name, s)
	return got.(*agentSeries)
}

func (m *Metrics) run(agent, lane string) *runSeries {
	k := runKey{agent, lane}
	if s, ok := m.runs.Load(k); ok {
		return s.(*runSeries)
	}
	s := &runSeries{started: m.started.WithLabelValues(agent, lane), wait: m.wait.WithLabelValues(agent, lane)}
	for i, o := range outcomes {
		s.finished[i] = m.finished.WithLabelValues(agent, lane, string(o))
	}
	got, _ := m.runs.LoadOrStore(k, s)
	return got.(*runSeries)
}

// Claimed records one claim call for agent: n runs claimed, or err.
func (m *Metrics) Claimed(agent string, n int, took time.Duration, err error) {
	s := m.agent(agent)
	s.latency.Observe(took.Seconds())
	switch {
	case err != nil:
		s.failed.Inc()
		m.dbErrors.WithLabelValues("claim").Inc()
	case n == 0:
		s.empty.Inc()
	default:
		s.claimed.Inc()
	}
}

// RunStarted records a run handed to a child, and how long its task had
// waited since it was due (negative: unknown, not observed).
func (m *Metrics) RunStarted(agent, lane string, wait time.Duration) {
	s := m.run(agent, lane)
	s.started.Inc()
	if wait >= 0 {
		s.wait.Observe(wait.Seconds())
	}
}

// QueueWait records how long a run's task waited since it was due, when
// that is learnt after the start.
func (m *Metrics) QueueWait(agent, lane string, wait time.Duration) {
	m.run(agent, lane).wait.Observe(max(wait, 0).Seconds())
}

// RunEnded records a run's end: its outcome, how long it took since its
// claim, and why the daemon stopped it ("" when the child ended by itself;
// else a supervisor stop reason, "lease lost" is told as lease_lost).
func (m *Metrics) RunEnded(agent, lane string, outcome lease.RunState, reason string, took time.Duration) {
	s := m.run(agent, lane)
	i := outcomeIndex(outcome)
	if i >= 0 {
		s.finished[i].Inc()
		d := s.duration[i].Load()
		if d == nil {
			h := m.duration.WithLabelValues(agent, lane, string(outcome))
			s.duration[i].CompareAndSwap(nil, &h)
			d = s.duration[i].Load()
		}
		(*d).Observe(took.Seconds())
	} else {
		m.finished.WithLabelValues(agent, lane, string(outcome)).Inc()
		m.duration.WithLabelValues(agent, lane, string(outcome)).Observe(took.Seconds())
	}
	if reason != "" {
		m.kills.WithLabelValues(agent, killReason(reason)).Inc()
	}
}

func outcomeIndex(o lease.RunState) int {
	for i, x := range outcomes {
		if x == o {
			return i
		}
	}
	return -1
}

// killReason is the label for a supervisor stop reason: words joined by
// underscores.
func killReason(r string) string {
	if r == "lease lost" {
		return "lease_lost"
	}
	return r
}

// SettleFailed records a settlement the queue did not take for a reason
// other than a lost lease.
func (m *Metrics) SettleFailed() { m.dbErrors.WithLabelValues("settle").Inc() }

// Heartbeat records one batched heartbeat call.
func (m *Metrics) Heartbeat(took time.Duration, err error) {
	m.beatLatency.Observe(took.Seconds())
	if err != nil {
		m.beatErrors.Inc()
	}
}

// LoopPass records one pass of the heartbeat loop.
func (m *Metrics) LoopPass() { m.passes.Inc() }

// Reloaded records a config reload and whether it took.
func (m *Metrics) Reloaded(ok bool) {
	if ok {
		m.reloadSuccess.Inc()
		m.reloadOK.Set(1)
		return
	}
	m.reloadFailure.Inc()
	m.reloadOK.Set(0)
}
