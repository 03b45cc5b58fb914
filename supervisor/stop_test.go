package supervisor

import "testing"

// allReasons lists every stop reason, in the order of the columns below.
var allReasons = []stopReason{stopNone, stopTimeout, stopStall, stopCancel, stopShutdown, stopFenced, stopLeaseLost}

func TestStopReason_Replaces(t *testing.T) {
	// Ensure a later reason replaces an earlier one only as the precedence
	// table says: the first of timeout, stall, cancel and shutdown stays,
	// fenced replaces those, lease lost replaces everything, and nothing
	// replaces lease lost. Each row is a new reason; its columns say (x)
	// whether it replaces none, timeout, stall, cancel, shutdown, fenced,
	// lease lost.
	tests := []struct {
		name string
		r    stopReason
		want string
	}{
		{"None", stopNone, "......."},
		{"Timeout", stopTimeout, "x......"},
		{"Stall", stopStall, "x......"},
		{"Cancel", stopCancel, "x......"},
		{"Shutdown", stopShutdown, "x......"},
		{"Fenced", stopFenced, "xxxxx.."},
		{"LeaseLost", stopLeaseLost, "xxxxxx."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := make([]byte, len(allReasons))
			for i, old := range allReasons {
				got[i] = '.'
				if tt.r.replaces(old) {
					got[i] = 'x'
				}
			}
			if string(got) != tt.want {
				t.Fatalf("%q replaces %s, want %s (columns: %q)", tt.r, got, tt.want, allReasons)
			}
		})
	}
}

func TestStopReason_LeaseGone(t *testing.T) {
	// Ensure only fenced and lease lost give the lease up: a child stopped
	// for its own reasons keeps its heartbeats until it exits.
	want := map[stopReason]bool{stopFenced: true, stopLeaseLost: true}
	for _, r := range allReasons {
		if got := r.leaseGone(); got != want[r] {
			t.Errorf("%q leaseGone = %v, want %v", r, got, want[r])
		}
	}
}

func TestStopReason_String(t *testing.T) {
	// Ensure every reason has the name status shows for it.
	want := []string{"", "timeout", "stall", "cancel", "shutdown", "fenced", "lease lost"}
	for i, r := range allReasons {
		if got := r.String(); got != want[i] {
			t.Errorf("reason %d = %q, want %q", i, got, want[i])
		}
	}
}
