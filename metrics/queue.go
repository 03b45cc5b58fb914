package metrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/qd-run/qd/lease"
)

// ForQueue is the exposition of a process that reads the queue but runs
// nothing (the dashboard): the lane, limit and budget gauges, qd_queue_up, qd_build_info and
// the Go and process collectors, on a registry of its own. version is
// qd's (empty: "unknown").
func ForQueue(q lease.Provider, version string) http.Handler {
	reg := newRegistry(version)
	reg.MustRegister(&laneCollector{queue: q, timeout: LanesTimeout}, &spendCollector{queue: q, timeout: LanesTimeout})
	return handler(reg)
}

func handler(reg *prometheus.Registry) http.Handler {
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	})
}
