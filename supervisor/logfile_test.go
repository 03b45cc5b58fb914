package supervisor

import (
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/qd-run/qd/lease"
)

func TestSupervisor_LogFileWithFirstOutput(t *testing.T) {
	// Ensure a run that writes nothing leaves no log file and still
	// completes, while a run that writes only late, after a silence, gets
	// its whole output in its log.
	t.Parallel()
	h := MustHarness(t, nil)
	quiet := h.start("exit 0", "{}", Spec{})
	late := h.start("sleep 0.3; echo late words", "{}", Spec{})
	if r := h.waitRun(quiet.RunID); r.State != lease.RunCompleted || r.OutputTail != "" {
		t.Fatalf("quiet run = %s with tail %q, want completed with none", r.State, r.OutputTail)
	}
	if _, err := os.Stat(LogPath(h.state, quiet.RunID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("quiet run's log file: stat error %v, want none there", err)
	}
	if r := h.waitRun(late.RunID); r.State != lease.RunCompleted {
		t.Fatalf("late run = %s, want completed", r.State)
	}
	b, err := os.ReadFile(LogPath(h.state, late.RunID))
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != "late words\n" {
		t.Errorf("late run's log = %q, want %q", b, "late words\n")
	}
}
