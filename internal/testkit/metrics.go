package testkit

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is a parsed exposition in Prometheus' text format, for tests
// that read qd's metrics back.
type Scrape map[string]*dto.MetricFamily

// ParseMetrics parses an exposition in Prometheus' text format.
func ParseMetrics(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	return Scrape(fams), nil
}

// Value is the value of the series of family name whose labels include
// every pair of labels (name, value, name, value...): a gauge's or
// counter's value, a histogram's count. Several series that match are
// added up; ok is false when none does.
func (s Scrape) Value(name string, labels ...string) (v float64, ok bool) {
	f := s[name]
	if f == nil {
		return 0, false
	}
	for _, m := range f.GetMetric() {
		if !matches(m, labels) {
			continue
		}
		ok = true
		switch {
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			v += m.Untyped.GetValue()
		}
	}
	return v, ok
}

// Sum is a histogram's sum of observations over the series that match.
func (s Scrape) Sum(name string, labels ...string) float64 {
	var v float64
	if f := s[name]; f != nil {
		for _, m := range f.GetMetric() {
			if matches(m, labels) && m.Histogram != nil {
				v += m.Histogram.GetSampleSum()
			}
		}
	}
	return v
}

// LabelNames lists every label name used by the families whose name starts
// with prefix, sorted.
func (s Scrape) LabelNames(prefix string) []string {
	seen := map[string]bool{}
	for name, f := range s {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				seen[l.GetName()] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func matches(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			if l.GetName() == labels[i] && l.GetValue() == labels[i+1] {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}
