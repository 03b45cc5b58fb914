package faults

import (
	"testing"
	"time"
)

// Ensure the audit checks see what they are meant to see: two runs of one
// task overlapping, and a lane over its limit; and that a killed run (no
// end written) counts as alive for one tick after its last event.
func TestChecker_SeesViolations(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name    string
		spans   []*span
		overlap int
		occ     int
	}{
		{"back to back", []*span{
			{task: 1, run: 1, lane: "a", start: at(0), last: at(100), ended: true},
			{task: 1, run: 2, lane: "a", start: at(100), last: at(200), ended: true},
		}, 0, 1},
		{"overlap", []*span{
			{task: 1, run: 1, lane: "a", start: at(0), last: at(150), ended: true},
			{task: 1, run: 2, lane: "a", start: at(100), last: at(200), ended: true},
		}, 1, 2},
		{"killed run still counted", []*span{
			{task: 1, run: 1, lane: "a", start: at(0), last: at(100)},
			{task: 1, run: 2, lane: "a", start: at(200), last: at(300), ended: true},
		}, 1, 2},
		{"killed run settled by its owner", []*span{
			{task: 1, run: 1, lane: "a", start: at(0), last: at(100), settled: at(150)},
			{task: 1, run: 2, lane: "a", start: at(160), last: at(300), ended: true},
		}, 0, 1},
		{"grandchild keeps a run alive", []*span{
			{task: 1, run: 1, lane: "a", start: at(0), last: at(100), ended: true, spawned: true},
			{task: 1, run: 2, lane: "a", start: at(1000), last: at(1100), ended: true},
		}, 0, 1},
		{"other tasks share a lane", []*span{
			{task: 1, run: 1, lane: "a", start: at(0), last: at(500), ended: true},
			{task: 2, run: 2, lane: "a", start: at(100), last: at(600), ended: true},
			{task: 3, run: 3, lane: "a", start: at(200), last: at(300), ended: true},
			{task: 4, run: 4, lane: "b", start: at(200), last: at(300), ended: true},
		}, 0, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if n, _, _ := overlaps(tt.spans); n != tt.overlap {
				t.Errorf("overlaps: got %d, want %d", n, tt.overlap)
			}
			if got := occupancy(tt.spans)["a"]; got != tt.occ {
				t.Errorf("occupancy of lane a: got %d, want %d", got, tt.occ)
			}
		})
	}
}
