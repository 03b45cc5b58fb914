package supervisor

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
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

// Ensure the stream record says where the log switches between stdout and
// stderr, so that stderr can be shown alone, and that a run writing only
// to stdout has none.
func TestSupervisor_StreamRecord(t *testing.T) {
	h := MustHarness(t, nil)
	l := h.start("echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2", "{}", Spec{})
	h.waitRun(l.RunID)
	h.waitGone()
	log, err := os.ReadFile(LogPath(h.state, l.RunID))
	if err != nil || string(log) != "out1\nerr1\nout2\n" {
		t.Fatalf("log = %q, %v", log, err)
	}
	segs, err := ReadStreams(StreamsPath(h.state, l.RunID))
	want := []Segment{{0, false}, {5, true}, {10, false}}
	if err != nil || !slices.Equal(segs, want) {
		t.Errorf("segments = %v, %v; want %v", segs, err, want)
	}
	quiet := h.start("echo only stdout", "{}", Spec{})
	h.waitRun(quiet.RunID)
	h.waitGone()
	if _, err := os.Stat(StreamsPath(h.state, quiet.RunID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a run that wrote only to stdout has a stream record: %v", err)
	}
}

// Ensure that with MergeOutput what a child writes to stdout and stderr
// back to back is logged in the order written, all of it stdout (no
// stream record). It logs whether the default's two pipes kept the same
// lines in order: the kernel keeps no order between two pipes, and here
// they mostly did not, which is why the option exists.
func TestSupervisor_MergedOutputKeepsOrder(t *testing.T) {
	h := MustHarness(t, nil)
	body := `i=0; while [ $i -lt 2000 ]; do echo o$i; echo e$i >&2; i=$((i+1)); done`
	want := ""
	for i := range 2000 {
		want += fmt.Sprintf("o%d\ne%d\n", i, i)
	}
	merged := h.start(body, "{}", Spec{MergeOutput: true})
	if r := h.waitRun(merged.RunID); r.State != lease.RunCompleted {
		t.Fatalf("merged run: %s %q", r.State, r.Summary)
	}
	h.waitGone()
	log, err := os.ReadFile(LogPath(h.state, merged.RunID))
	if err != nil || string(log) != want {
		t.Errorf("merged output: %d bytes, %v; not the %d lines in the order written", len(log), err, 4000)
	}
	if _, err := os.Stat(StreamsPath(h.state, merged.RunID)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("merged output has a stream record: %v", err)
	}

	apart := h.start(body, "{}", Spec{})
	h.waitRun(apart.RunID)
	h.waitGone()
	log, err = os.ReadFile(LogPath(h.state, apart.RunID))
	if err != nil || len(log) != len(want) {
		t.Fatalf("separate output: %d bytes, %v; want %d", len(log), err, len(want))
	}
	t.Logf("with two pipes the same %d lines were logged in order: %v", 4000, string(log) == want)
}
