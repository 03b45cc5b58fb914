package pg_test

import (
	"context"
	"testing"

	"github.com/qd-run/qd/pg"
)

// Ensure lane lock keys never change: daemons of different versions
// exclude each other only while they compute the same key for a lane.
func TestLaneKey(t *testing.T) {
	golden := []struct {
		lane string
		want int32
	}{
		{"default", -1038117221},
		{"a", 214005177},
		{"build", -1327880363},
		{"lane-1", -1066941986},
		{"x.y_z", 789254537},
		{"0", -808640380},
	}
	p := MustOpen(t)
	for _, g := range golden {
		if got := pg.LaneKey(g.lane); got != g.want {
			t.Errorf("LaneKey(%q) = %d, want %d", g.lane, got, g.want)
		}
		var sqlKey int32
		err := p.Pool().QueryRow(context.Background(), "SELECT "+p.Schema()+".lane_key($1)", g.lane).Scan(&sqlKey)
		if err != nil {
			t.Fatalf("lane_key(%q): %v", g.lane, err)
		}
		if sqlKey != g.want {
			t.Errorf("SQL lane_key(%q) = %d, want %d", g.lane, sqlKey, g.want)
		}
	}
}
