package supervisor

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// StateDirHealth says whether writes to the state directory are failing.
type StateDirHealth struct {
	// WriteError is the last failed write (a run log or a child record),
	// empty once a run's log was written whole after it.
	WriteError string
	At         time.Time // when WriteError happened
	// IncompleteLogs counts the runs since start whose log file lacks
	// output; their settlements say so (lease.Settlement.LogError).
	IncompleteLogs int
}

// stateDirHealth is the supervisor's record behind StateDirHealth.
type stateDirHealth struct {
	mu sync.Mutex
	h  StateDirHealth
}

// failed records a failed write.
func (d *stateDirHealth) failed(err error, incompleteLog bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.h.WriteError, d.h.At = err.Error(), time.Now()
	if incompleteLog {
		d.h.IncompleteLogs++
	}
}

// wrote records a run log written whole: writes work again.
func (d *stateDirHealth) wrote() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.h.WriteError, d.h.At = "", time.Time{}
}

// StateDirHealth reports whether writes to the state directory fail.
func (s *Supervisor) StateDirHealth() StateDirHealth {
	s.stateDir.mu.Lock()
	defer s.stateDir.mu.Unlock()
	return s.stateDir.h
}

// RemakeStateDir recreates the state directory's folders after the
// directory was deleted under the daemon, and writes the child record
// journal anew with the records of the children alive (the open one went
// with the directory), so that a later incarnation still finds and kills
// them. The log files of those children went too: their output tails stay
// on their run rows. It returns how many children were recorded again.
func (s *Supervisor) RemakeStateDir() (int, error) {
	for _, d := range []string{s.cfg.StateDir, runsDir(s.cfg.StateDir), childrenDir(s.cfg.StateDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			s.stateDir.failed(err, false)
			return 0, fmt.Errorf("remake state directory: %w", err)
		}
	}
	j := &s.journal
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.f != nil {
		j.f.Close()
		j.f, j.spare = nil, false
	}
	if len(j.live) == 0 {
		return 0, nil
	}
	var b strings.Builder
	for _, line := range j.live {
		b.WriteString(line)
	}
	j.path = journalPath(s.cfg.StateDir)
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o600)
	if err == nil {
		if _, err = f.WriteString(b.String()); err != nil {
			f.Close()
		}
	}
	if err != nil {
		s.stateDir.failed(err, false)
		return 0, fmt.Errorf("rewrite child records: %w", err)
	}
	j.f, j.lines = f, len(j.live)
	return len(j.live), nil
}
