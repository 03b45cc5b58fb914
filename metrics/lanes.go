package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qd-run/qd/lease"
)

// LanesTimeout bounds the read of the lanes at each scrape: a database that
// does not answer in time gives qd_queue_up 0 and no lane series, never a
// hung scrape.
const LanesTimeout = 2 * time.Second

var (
	laneLabels = []string{"lane"}
	descQueued = prometheus.NewDesc("qd_lane_queued_tasks",
		"Tasks queued in the lane, eligible now or later.", laneLabels, nil)
	descRunning = prometheus.NewDesc("qd_lane_running_runs",
		"Runs of the lane that hold a live lease, by any daemon.", laneLabels, nil)
	descMax = prometheus.NewDesc("qd_lane_max_running",
		"The lane's limit on runs at once.", laneLabels, nil)
	descPaused = prometheus.NewDesc("qd_lane_paused",
		"1 when the lane is paused (nothing new is claimed from it), else 0.", laneLabels, nil)
	descOldest = prometheus.NewDesc("qd_lane_oldest_queued_age_seconds",
		"Seconds since the lane's oldest queued task was enqueued; 0 when nothing is queued.", laneLabels, nil)
	descUp = prometheus.NewDesc("qd_queue_up",
		"1 when the queue answered the read of the lanes at this scrape, else 0.", nil, nil)
)

// laneCollector reads Provider.Lanes at each scrape: the gauges are the
// queue's, shared by every daemon on it, not this process's view.
type laneCollector struct {
	queue   lease.Provider
	timeout time.Duration
	onError func(error) // may be nil
}

func (c *laneCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descQueued, descRunning, descMax, descPaused, descOldest, descUp} {
		ch <- d
	}
}

func (c *laneCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	lanes, err := c.queue.Lanes(ctx)
	if err != nil {
		if c.onError != nil {
			c.onError(err)
		}
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	now := time.Now()
	for _, l := range lanes {
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l.Name)
		}
		gauge(descQueued, float64(l.Queued))
		gauge(descRunning, float64(l.Running))
		gauge(descMax, float64(l.MaxRunning))
		gauge(descPaused, b2f(l.Paused))
		age := 0.0
		if !l.OldestQueued.IsZero() {
			age = max(now.Sub(l.OldestQueued).Seconds(), 0)
		}
		gauge(descOldest, age)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
