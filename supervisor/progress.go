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
	r := s.runs[runID]
	s.mu.Unlock()
	if r == nil {
		return fmt.Errorf("record progress of run %d: %w", runID, ErrUnknownRun)
	}
	r.out.lastAt.Store(s.mono())
	r.out.lastWall.Store(time.Now().UnixNano())
	return nil
}
