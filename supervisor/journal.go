package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// childRecord is what the supervisor writes for each child so that a later
// incarnation can kill the group if this one dies without cleaning up.
type childRecord struct {
	Boot        string // bootID() when written
	DaemonPID   int
	DaemonStart uint64
	PGID, PID   int
	Start       uint64 // the child's start time
	RunID       int64
}

func (c childRecord) encode() string {
	return fmt.Sprintf("boot=%s daemon=%d:%d pgid=%d pid=%d start=%d run=%d\n",
		c.Boot, c.DaemonPID, c.DaemonStart, c.PGID, c.PID, c.Start, c.RunID)
}

func decodeRecord(text string) (childRecord, error) {
	var c childRecord
	kv := map[string]string{}
	for _, f := range strings.Fields(text) {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	d, ds, _ := strings.Cut(kv["daemon"], ":")
	var errs []error
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		errs = append(errs, err)
		return n
	}
	c.Boot = kv["boot"]
	c.DaemonPID, c.DaemonStart = int(num(d)), uint64(num(ds))
	c.PGID, c.PID, c.Start = int(num(kv["pgid"])), int(num(kv["pid"])), uint64(num(kv["start"]))
	c.RunID = num(kv["run"])
	if err := errors.Join(errs...); err != nil || c.PGID <= 1 || c.PID <= 1 {
		return c, fmt.Errorf("parse child record %q: bad field", strings.TrimSpace(text))
	}
	return c, nil
}

// journal holds the child records of this incarnation in one append-only
// file under childrenDir: a record line when a child starts, an "end" line
// when it is gone. Appending to one file costs no inode per child; a file
// created and removed per child made every start allocate an inode, which
// on some file systems (ext4 without a journal skips inodes freed in the
// last minutes, one by one) grew slower with every child already run. The
// file is rewritten with only the live records when it is mostly end lines.
// When no child lives it is emptied and moved out of childrenDir (to
// sparePath, a rename, which allocates nothing), and moved back with the
// next child; Drain removes it.
type journal struct {
	mu    sync.Mutex
	path  string
	f     *os.File
	spare bool             // f is empty and at sparePath
	live  map[int64]string // run id → record line
	lines int              // lines in the file
}

// self returns the boot id and this process's start time, read once.
func (s *Supervisor) self() (boot string, start uint64) {
	s.selfOnce.Do(func() {
		s.boot = bootID()
		s.start, _ = procStart(os.Getpid())
	})
	return s.boot, s.start
}

// journalCompact is the number of lines past which the file is rewritten
// when fewer than a quarter of them are live records.
const journalCompact = 4096

func journalPath(state string) string {
	return filepath.Join(childrenDir(state), fmt.Sprintf("journal-%d", os.Getpid()))
}

// sparePath is where the empty journal waits for the next child.
func sparePath(state string) string {
	return filepath.Join(state, fmt.Sprintf(".journal-spare-%d", os.Getpid()))
}

// record appends the record of c's process to the journal.
func (s *Supervisor) record(c *child) {
	start, _ := procStart(c.pid)
	boot, self := s.self()
	rec := childRecord{Boot: boot, DaemonPID: os.Getpid(), DaemonStart: self,
		PGID: c.pid, PID: c.pid, Start: start, RunID: c.l.RunID}
	line := rec.encode()
	j := &s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil && j.spare {
		if err := os.Rename(sparePath(s.cfg.StateDir), j.path); err != nil {
			c.log.Warn("reuse child record journal", "error", err)
			j.f.Close()
			j.f = nil
		}
		j.spare = false
	}
	if j.f == nil {
		j.path = journalPath(s.cfg.StateDir)
		f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
		if errors.Is(err, os.ErrNotExist) {
			// The state directory was deleted under the daemon; the
			// daemon remakes the rest of it (keepStateDir).
			if err = os.MkdirAll(childrenDir(s.cfg.StateDir), 0o700); err == nil {
				f, err = os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
			}
		}
		if err != nil {
			s.stateDir.failed(err, false)
			c.log.Error("write child record", "error", err)
			return
		}
		j.f, j.live, j.lines = f, map[int64]string{}, 0
	}
	if _, err := j.f.WriteString(line); err != nil {
		s.stateDir.failed(err, false)
		c.log.Error("write child record", "file", j.path, "error", err)
		return
	}
	j.live[c.l.RunID] = line
	j.lines++
}

// unrecord marks c's process gone in the journal.
func (s *Supervisor) unrecord(c *child) {
	j := &s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, ok := j.live[c.l.RunID]; !ok || j.f == nil {
		return
	}
	delete(j.live, c.l.RunID)
	if len(j.live) == 0 {
		j.lines = 0
		err := j.f.Truncate(0)
		if err == nil {
			err = os.Rename(j.path, sparePath(s.cfg.StateDir))
		}
		if err == nil {
			j.spare = true
			return
		}
		j.f.Close()
		j.f = nil
		if err := os.Remove(j.path); err != nil && !errors.Is(err, os.ErrNotExist) {
			c.log.Error("remove child records", "file", j.path, "error", err)
		}
		return
	}
	if _, err := j.f.WriteString(fmt.Sprintf("end run=%d\n", c.l.RunID)); err != nil {
		c.log.Error("write child record", "file", j.path, "error", err)
		return
	}
	j.lines++
	if j.lines > journalCompact && j.lines > 4*len(j.live) {
		if err := j.compact(); err != nil {
			c.log.Error("rewrite child records", "file", j.path, "error", err)
		}
	}
}

// discardJournal removes the journal when it is empty and set aside.
func (s *Supervisor) discardJournal() {
	j := &s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f == nil || !j.spare {
		return
	}
	j.f.Close()
	j.f, j.spare = nil, false
	if err := os.Remove(sparePath(s.cfg.StateDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
		s.log.Warn("remove spare child record journal", "error", err)
	}
}

// compact rewrites the journal with its live records only; j.mu is held.
func (j *journal) compact() error {
	var b strings.Builder
	for _, line := range j.live {
		b.WriteString(line)
	}
	tmp := j.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return err
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	j.f.Close()
	j.f, j.lines = f, len(j.live)
	return nil
}

// readRecords parses a file of child records: record lines, and "end"
// lines that take back the record of their run. It returns the records
// still standing, in the order they were written.
func readRecords(text string) (recs []childRecord, bad []error) {
	var order []int64
	byRun := map[int64]childRecord{}
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(line, "end run="); ok {
			if id, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil {
				delete(byRun, id)
				continue
			}
		}
		c, err := decodeRecord(line)
		if err != nil {
			bad = append(bad, err)
			continue
		}
		if _, seen := byRun[c.RunID]; !seen {
			order = append(order, c.RunID)
		}
		byRun[c.RunID] = c
	}
	for _, id := range order {
		if c, ok := byRun[id]; ok {
			recs = append(recs, c)
			delete(byRun, id)
		}
	}
	return recs, bad
}
