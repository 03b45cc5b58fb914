// Package metrics is qd's Prometheus exposition: one private registry per
// process (never the default one), the Go and process collectors, a build
// info gauge, lane gauges read from the queue at scrape time, and the
// counters and histograms the daemon feeds from the places that already
// know (claims, heartbeat passes, run ends, reloads).
//
// Labels are agent, lane, outcome and reason only: never a task or run id,
// so the number of series stays that of the config, not of the history.
// docs/metrics.md lists every metric.
//
// It imports lease and the Prometheus client only; the scheduler and the
// supervisor do not import it (the daemon hands them small hooks).
package metrics
