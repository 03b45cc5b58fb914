package pg

import (
	"strings"
	"testing"
)

// Ensure a restart of the same server is no change, and that another
// cluster, database or timeline, or a write-ahead log behind what was
// seen, each is, saying which.
func TestChangeOf(t *testing.T) {
	prev := serverID{system: "7714", timeline: 1, database: 16384, lsn: 0x1_E6E1CED0, started: "09:00"}
	seen := uint64(0x1_E6E20000)
	tests := []struct {
		name string
		next serverID
		want string // part of the reason; "" for no change
	}{
		{"restart", serverID{system: "7714", timeline: 1, database: 16384, lsn: 0x1_E6E30000, started: "09:05"}, ""},
		{"another cluster", serverID{system: "9999", timeline: 1, database: 16384, lsn: 0x2_00000000, started: "09:05"}, "another cluster"},
		{"another database", serverID{system: "7714", timeline: 1, database: 16999, lsn: 0x2_00000000, started: "09:00"}, "another database"},
		{"promoted standby", serverID{system: "7714", timeline: 2, database: 16384, lsn: 0x2_00000000, started: "09:05"}, "another timeline"},
		{"copy behind", serverID{system: "7714", timeline: 1, database: 16384, lsn: 0x1_E6E10000, started: "09:05"}, "behind what this qd saw (1/E6E20000 then 1/E6E10000)"},
	}
	for _, tt := range tests {
		got := changeOf(prev, tt.next, seen)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: changeOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestParseLSN(t *testing.T) {
	for in, want := range map[string]uint64{"0/0": 0, "1/E6E1CED0": 0x1_E6E1CED0, "FF/1": 0xFF_00000001} {
		if got, err := parseLSN(in); err != nil || got != want {
			t.Errorf("parseLSN(%q) = %X, %v; want %X", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "x/y", "1/"} {
		if _, err := parseLSN(in); err == nil {
			t.Errorf("parseLSN(%q) accepted", in)
		}
	}
}
