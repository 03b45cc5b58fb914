package supervisor

import (
	"errors"
	"fmt"
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
