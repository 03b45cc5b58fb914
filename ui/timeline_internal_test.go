package ui

import (
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure runs of a lane that only touch (one ends as the next starts, as a
// lane of limit 1 runs them) share one track, however narrow the day
// draws them, and that runs that overlap get a track each.
func TestLayout_Tracks(t *testing.T) {
	from := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(24 * time.Hour)
	at := func(s string) time.Time { d, _ := time.ParseDuration(s); return from.Add(12*time.Hour + d) }
	run := func(id int64, lane, start, end string) lease.Run {
		return lease.Run{ID: id, Lane: lane, State: lease.RunCompleted, StartedAt: at(start), FinishedAt: at(end)}
	}
	runs := []lease.Run{
		run(1, "one", "0s", "2s"), run(2, "one", "2s", "4s"), run(3, "one", "4.01s", "9s"),
		run(4, "two", "0s", "10s"), run(5, "two", "5s", "15s"),
	}
	tl := layout(from, to, "day", runs, nil, lease.Count{N: 5})
	tracks := map[string]int{}
	for _, row := range tl.Lanes {
		tracks[row.Lane] = len(row.ends)
	}
	if tracks["one"] != 1 {
		t.Errorf("lane of runs that touch: %d tracks, want 1", tracks["one"])
	}
	if tracks["two"] != 2 {
		t.Errorf("lane of runs that overlap: %d tracks, want 2", tracks["two"])
	}
}
