package ui

import (
	"time"

	"github.com/qd-run/qd/lease"
)

// The tasks, runs and lanes of the pages' JSON are api's (api/facts.go),
// the objects `qd ... --json` prints; a page's own fields beside them
// (labels, classes, what only the page shows) are tagged out of its JSON.

// list converts each of xs with to; the list is empty, not null, when xs
// is.
func list[T, J any](xs []T, to func(T) J) []J {
	out := make([]J, 0, len(xs))
	for _, x := range xs {
		out = append(out, to(x))
	}
	return out
}

// BucketRow is one interval of the throughput charts.
type BucketRow struct {
	At       time.Time                `json:"at"`
	Finished map[lease.RunState]int64 `json:"finished"`
	Started  int64                    `json:"started"`
	WaitP50  float64                  `json:"wait_p50_seconds"`
	WaitP90  float64                  `json:"wait_p90_seconds"`
	WaitP99  float64                  `json:"wait_p99_seconds"`
	// Usage is what the runs finished in the interval reported spending
	// (qd usage), by agent; absent when none did.
	Usage map[string]float64 `json:"usage,omitempty"`
}
