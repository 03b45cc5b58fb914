package supervisor

import (
	"errors"
	"fmt"
	"syscall"
	"time"
)

// ErrUnknownRun: the run is not one this supervisor is running.
var ErrUnknownRun = errors.New("run is not supervised by this daemon")

// Progress records that the child of run runID proved progress on its own
// (through the status socket): it counts as output for StallTimeout and for
// the last-output time shown in status.
func (s *Supervisor) Progress(runID int64) error {
	s.mu.Lock()
	c := s.children[runID]
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("record progress of run %d: %w", runID, ErrUnknownRun)
	}
	c.out.lastAt.Store(s.mono())
	c.out.lastWall.Store(time.Now().UnixNano())
	return nil
}

// RunOfProcess returns the run whose child's process group holds pid (the
// child itself, or a `qd` it started), 0 when none does: the daemon names
// the run behind a request on its socket.
func (s *Supervisor) RunOfProcess(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return 0
	}
	for _, c := range s.live() {
		c.mu.Lock()
		leader := c.pid
		c.mu.Unlock()
		if leader == pgid {
			return c.l.RunID
		}
	}
	return 0
}
