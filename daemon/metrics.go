package daemon

import (
	"context"
	"net/http"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/metrics"
	"github.com/qd-run/qd/supervisor"
)

// waitQueue bounds the runs whose queue wait is still to be read; past it
// the wait of a run is not observed rather than delay anything.
const waitQueue = 256

// waited is a run handed to a child whose task's run_after is still to be
// read, for qd_queue_wait_seconds.
type waited struct {
	agent, lane string
	taskID      int64
	attempt     int
	// start is when the run began by the database's clock: the lease's
	// expiry less its length.
	start time.Time
}

// newMetrics makes the daemon's exposition: the lanes of its queue and the
// children it runs by agent are read at each scrape.
func (d *daemon) newMetrics(version string) {
	d.metrics = metrics.New(metrics.Options{Version: version, Queue: d.queue, Children: d.children})
	d.exposition = d.metrics.Handler()
	d.waits = make(chan waited, waitQueue)
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

func (d *daemon) heartbeat(_ int, took time.Duration, err error) { d.metrics.Heartbeat(took, err) }

// runStarted counts a run handed to the supervisor and queues the read of
// how long its task waited.
func (d *daemon) runStarted(l *lease.Lease, leaseFor time.Duration) {
	d.metrics.RunStarted(l.Agent, l.Lane, -1)
	w := waited{agent: l.Agent, lane: l.Lane, taskID: l.TaskID, attempt: l.Attempt,
		start: l.LeaseExpiresAt.Add(-leaseFor)}
	select {
	case d.waits <- w:
	default:
	}
}

// measureWaits reads, one run at a time, the run_after of each started
// run's task and observes the wait from it to the run's start, both by the
// database's clock. run_after stays as it was while the run lives and
// after it ends for good; a task queued again (the run failed, to be
// retried) or claimed again has a new one, and its wait is left out. It is
// off the claim's path: a slow database only leaves waits unobserved.
func (d *daemon) measureWaits(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case w := <-d.waits:
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			t, err := d.queue.Task(rctx, w.taskID)
			cancel()
			if err == nil && t.Attempts == w.attempt && t.State != lease.TaskQueued {
				d.metrics.QueueWait(w.agent, w.lane, w.start.Sub(t.RunAfter))
			}
		}
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
