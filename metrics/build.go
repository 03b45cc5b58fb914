package metrics

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// buildVersion is version when set, else the module version the build
// recorded, else "devel" with the VCS revision when there is one.
func buildVersion(version string) string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
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
