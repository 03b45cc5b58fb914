package supervisor

import (
	"slices"
	"syscall"
	"testing"
)

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

// allStates and allEvents list every stopState and stopEvent, in the order
// of the rows and columns below.
var (
	allStates = []stopState{unstarted, termPending, killPending, running, terming, killed, reaped}
	allEvents = []stopEvent{askTerm, askKill, gotPID, graceOver, reap}
)

// stepText writes a step as the table of stopState does: the next state,
// and the signal it sends, if any.
func stepText(st step) string {
	switch st.sig {
	case 0:
		return st.to.String()
	case syscall.SIGTERM:
		return st.to.String() + " TERM"
	case syscall.SIGKILL:
		return st.to.String() + " KILL"
	}
	return st.to.String() + " " + st.sig.String()
}

func TestStopState_Next(t *testing.T) {
	t.Run("Table", func(t *testing.T) {
		// Ensure every state moves on every event as the table in the doc
		// of stopState says. Columns: askTerm, askKill, gotPID, graceOver,
		// reap.
		want := map[stopState][]string{
			unstarted:   {"termPending", "killPending", "running", "unstarted", "reaped"},
			termPending: {"termPending", "killPending", "terming TERM", "termPending", "reaped"},
			killPending: {"killPending", "killPending", "killed KILL", "killPending", "reaped"},
			running:     {"terming TERM", "killed KILL", "running", "running", "reaped KILL"},
			terming:     {"terming", "killed KILL", "terming", "killed KILL", "reaped KILL"},
			killed:      {"killed", "killed", "killed", "killed", "reaped KILL"},
			reaped:      {"reaped", "reaped", "reaped", "reaped", "reaped"},
		}
		for _, s := range allStates {
			for i, e := range allEvents {
				if got := stepText(s.next(e)); got != want[s][i] {
					t.Errorf("%s on %s = %q, want %q", s, e, got, want[s][i])
				}
			}
		}
	})

	t.Run("NothingAfterReap", func(t *testing.T) {
		// Ensure no event takes a reaped child out of reaped or sends its
		// group a signal: its pid may belong to another process by then.
		for _, e := range allEvents {
			if got := reaped.next(e); got != (step{to: reaped}) {
				t.Errorf("reaped on %s = %q, want reaped and no signal", e, stepText(got))
			}
		}
	})

	t.Run("NoSignalWithoutPID", func(t *testing.T) {
		// Ensure nothing is sent before the child has a pid (a signal to
		// group 0 would hit the daemon's own group), and that only gotPID
		// moves a child to a state with one.
		for _, s := range []stopState{unstarted, termPending, killPending} {
			for _, e := range allEvents {
				st := s.next(e)
				if e != gotPID && st.sig != 0 {
					t.Errorf("%s on %s sends %s without a pid", s, e, st.sig)
				}
				if hasPID := st.to >= running && st.to != reaped; hasPID != (e == gotPID) {
					t.Errorf("%s on %s = %s", s, e, st.to)
				}
			}
		}
	})

	t.Run("AskedBeforePID", func(t *testing.T) {
		// Ensure a stop asked for before the child has a pid is sent with
		// it, and that a kill wins over a term asked before or after it.
		tests := []struct {
			name   string
			events []stopEvent
			want   []syscall.Signal // sent, in order
		}{
			{"Term", []stopEvent{askTerm, gotPID}, []syscall.Signal{syscall.SIGTERM}},
			{"Kill", []stopEvent{askKill, gotPID}, []syscall.Signal{syscall.SIGKILL}},
			{"TermThenKill", []stopEvent{askTerm, askKill, gotPID}, []syscall.Signal{syscall.SIGKILL}},
			{"KillThenTerm", []stopEvent{askKill, askTerm, gotPID}, []syscall.Signal{syscall.SIGKILL}},
			{"TermTwice", []stopEvent{askTerm, askTerm, gotPID, graceOver}, []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}},
			{"NoneAsked", []stopEvent{gotPID, reap}, []syscall.Signal{syscall.SIGKILL}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				if got := signals(unstarted, tt.events...); !slices.Equal(got, tt.want) {
					t.Fatalf("%v sends %v, want %v", tt.events, got, tt.want)
				}
			})
		}
	})

	t.Run("EachSignalOnce", func(t *testing.T) {
		// Ensure SIGTERM and SIGKILL are each sent at most once, however
		// often they are asked for, before the group is reaped; SIGKILL
		// after the grace only when SIGKILL was not sent already.
		events := []stopEvent{gotPID, askTerm, askTerm, graceOver, askKill, askTerm, graceOver, askKill}
		want := []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL}
		if got := signals(unstarted, events...); !slices.Equal(got, want) {
			t.Fatalf("%v sends %v, want %v", events, got, want)
		}
	})
}

// signals runs events from s and returns the signals sent.
func signals(s stopState, events ...stopEvent) []syscall.Signal {
	var sent []syscall.Signal
	for _, e := range events {
		st := s.next(e)
		if st.sig != 0 {
			sent = append(sent, st.sig)
		}
		s = st.to
	}
	return sent
}
