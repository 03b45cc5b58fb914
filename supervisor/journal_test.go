package supervisor

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
)

func TestSupervisor_KillOrphansJournal(t *testing.T) {
	// Ensure a journal left by a crashed incarnation gets the groups of its
	// children still recorded live killed, and not those whose end it
	// recorded; a bad line is skipped and the journal is removed.
	state := t.TempDir()
	s, err := New(Config{Provider: &fakeProvider{}, Logger: MustLogger(t), StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	deadDaemon := exitedPID(t)
	live := startGroup(t, "sleep 300")
	ended := startGroup(t, "sleep 300")
	var b strings.Builder
	for i, pid := range []int{live.Process.Pid, ended.Process.Pid} {
		start, ok := procStart(pid)
		if !ok {
			t.Fatalf("pid %d not running", pid)
		}
		c := childRecord{Boot: bootID(), DaemonPID: deadDaemon, PGID: pid, PID: pid, Start: start, RunID: int64(i + 1)}
		b.WriteString(c.encode())
	}
	b.WriteString("end run=2\nnot a record\n")
	path := filepath.Join(childrenDir(state), "journal-1")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	killed, err := s.KillOrphans()
	if err != nil {
		t.Fatal(err)
	}
	if killed != 1 {
		t.Errorf("killed = %d, want 1", killed)
	}
	MustDie(t, live.Process.Pid, "child recorded live")
	if !alive(ended.Process.Pid) {
		t.Error("a child whose end was recorded was killed")
	}
	if ents, _ := os.ReadDir(childrenDir(state)); len(ents) != 0 {
		t.Errorf("%d files left in the children directory, want none", len(ents))
	}
}

func TestSupervisor_JournalBounded(t *testing.T) {
	// Ensure the journal stays small however many children came and went,
	// still holds exactly the live ones, and is gone when none lives.
	state := t.TempDir()
	s, err := New(Config{Provider: &fakeProvider{}, Logger: MustLogger(t), StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	const total, keep = 3 * journalCompact, 10
	self := os.Getpid()
	runs := make([]*child, 0, total)
	for i := range total {
		c := &child{l: &lease.Lease{RunID: int64(i + 1)}, pid: self, log: s.log}
		s.record(c)
		runs = append(runs, c)
		if i >= keep {
			s.unrecord(runs[i-keep])
		}
	}
	data, err := os.ReadFile(journalPath(state))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n > journalCompact+1 {
		t.Errorf("journal holds %d lines after %d children, want at most %d", n, total, journalCompact+1)
	}
	recs, bad := readRecords(string(data))
	if len(bad) > 0 {
		t.Errorf("journal has bad lines: %v", bad)
	}
	got := map[int64]bool{}
	for _, c := range recs {
		got[c.RunID] = true
	}
	for _, c := range runs[total-keep:] {
		if !got[c.l.RunID] {
			t.Errorf("live run %d not in the journal", c.l.RunID)
		}
	}
	if len(recs) != keep {
		t.Errorf("journal holds %d live records, want %d", len(recs), keep)
	}
	for _, c := range runs[total-keep:] {
		s.unrecord(c)
	}
	if ents, _ := os.ReadDir(childrenDir(state)); len(ents) != 0 {
		t.Errorf("%d files left in the children directory with no child, want none", len(ents))
	}
	// The next child is recorded again, alone.
	next := &child{l: &lease.Lease{RunID: total + 1}, pid: self, log: s.log}
	s.record(next)
	data, err = os.ReadFile(journalPath(state))
	if err != nil {
		t.Fatal(err)
	}
	if recs, _ := readRecords(string(data)); len(recs) != 1 || recs[0].RunID != next.l.RunID {
		t.Errorf("journal after a pause holds %v, want only run %d", recs, next.l.RunID)
	}
	s.unrecord(next)
	s.Drain(0, nil)
	ents, _ := os.ReadDir(state)
	for _, e := range ents {
		if e.Name() != "runs" && e.Name() != "children" {
			t.Errorf("%s left in the state directory after the drain", e.Name())
		}
	}
}
