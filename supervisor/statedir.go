package supervisor

import (
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
