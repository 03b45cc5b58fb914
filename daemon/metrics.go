package daemon

import (
	"net/http"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/metrics"
	"github.com/qd-run/qd/supervisor"
)

// newMetrics makes the daemon's exposition: the lanes of its queue and the
// children it runs by agent are read at each scrape.
func (d *daemon) newMetrics(version string) {
	o := metrics.Options{Version: version, Queue: d.queue, Children: d.children}
	if t := d.backend.Txs; t != nil {
		o.Transactions = t.Transactions
	}
	d.metrics = metrics.New(o)
	d.exposition = d.metrics.Handler()
}

// Metrics is the handler of the socket's /v1/metrics.
func (d *daemon) Metrics() http.Handler { return d.exposition }

// children counts the children of each configured agent.
func (d *daemon) children() map[string]int {
	conf := d.config()
	out := make(map[string]int, len(conf.Agents))
	for _, a := range conf.Agents {
		out[a.Name] = d.sup.Running(a.Name)
	}
	return out
}

// loopPass is the supervisor's OnLoop: the watchdog, and the pass counted.
func (d *daemon) loopPass() {
	d.metrics.LoopPass()
	d.watchdog()
}

func (d *daemon) heartbeat(_ int, took time.Duration, err error) {
	d.metrics.Heartbeat(took, err)
	if err == nil {
		d.answered()
	}
}

// runStarted counts a run handed to the supervisor and how long its task
// waited: from its run_after to the run's start (the lease's expiry less
// its length), both by the database's clock, as the claim returned them.
func (d *daemon) runStarted(l *lease.Lease, leaseFor time.Duration) {
	d.metrics.RunStarted(l.Agent, l.Lane, -1)
	if !l.RunAfter.IsZero() {
		d.metrics.QueueWait(l.Agent, l.Lane, l.LeaseExpiresAt.Add(-leaseFor).Sub(l.RunAfter))
	}
}

// runMetrics records how a run ended.
func (d *daemon) runMetrics(e supervisor.End) {
	took := time.Duration(0)
	if !e.Started.IsZero() {
		took = e.At.Sub(e.Started)
	}
	d.metrics.RunEnded(e.Lease.Agent, e.Lease.Lane, e.Settlement.Outcome, e.Reason, took)
	if !e.Settled && !e.LeaseLost() {
		d.metrics.SettleFailed()
	}
}
