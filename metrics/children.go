package metrics

import "github.com/prometheus/client_golang/prometheus"

var descChildren = prometheus.NewDesc("qd_agent_children",
	"Children this daemon runs for the agent now.", []string{"agent"}, nil)

// childCollector asks the daemon, at each scrape, how many children each
// agent has.
type childCollector func() map[string]int

func (c childCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descChildren }

func (c childCollector) Collect(ch chan<- prometheus.Metric) {
	for agent, n := range c() {
		ch <- prometheus.MustNewConstMetric(descChildren, prometheus.GaugeValue, float64(n), agent)
	}
}
