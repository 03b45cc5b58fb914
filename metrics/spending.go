package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/qd-run/qd/lease"
)

var (
	descUnits = prometheus.NewDesc("qd_limit_units_available",
		"Units of the rate limit a claim may take now; negative when runs spent more than it had.", []string{"limit"}, nil)
	descSpent = prometheus.NewDesc("qd_budget_spent",
		"What the budget's runs reported in its current period.", []string{"budget"}, nil)
	descBudgetMax = prometheus.NewDesc("qd_budget_max",
		"The most the budget's runs may report in a period before no more start.", []string{"budget"}, nil)
)

// spendCollector reads the queue's limits and budgets at each scrape,
// like laneCollector: the values are the queue's, the same from every
// daemon. A read that fails gives no series.
type spendCollector struct {
	queue   lease.Provider
	timeout time.Duration
}

func (c *spendCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descUnits, descSpent, descBudgetMax} {
		ch <- d
	}
}

func (c *spendCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	if ls, err := c.queue.Limits(ctx); err == nil {
		for _, l := range ls {
			ch <- prometheus.MustNewConstMetric(descUnits, prometheus.GaugeValue, float64(l.Available), l.Name)
		}
	}
	if bs, err := c.queue.Budgets(ctx); err == nil {
		for _, b := range bs {
			ch <- prometheus.MustNewConstMetric(descSpent, prometheus.GaugeValue, b.Spent, b.Name)
			ch <- prometheus.MustNewConstMetric(descBudgetMax, prometheus.GaugeValue, b.Max, b.Name)
		}
	}
}
