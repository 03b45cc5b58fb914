package metrics

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// buildVersion is the version the caller gives (qd's own, from cmd/qd),
// "unknown" when it gives none.
func buildVersion(version string) string {
	if version == "" {
		return "unknown"
	}
	return version
}

// newRegistry is a private registry with the Go and process collectors and
// qd_build_info.
func newRegistry(version string) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "qd_build_info",
		Help: "Always 1; its labels say which qd and which Go built this process.",
		ConstLabels: prometheus.Labels{
			"version":    buildVersion(version),
			"go_version": runtime.Version(),
		},
	})
	info.Set(1)
	reg.MustRegister(
		prometheus.NewGoCollector(),
		prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}),
		info,
	)
	return reg
}
