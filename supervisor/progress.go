package supervisor

import (
	"crypto/subtle"
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

// ExitDefer is the exit status (EX_TEMPFAIL) with which a child defers
// its task: try later, without losing an attempt.
const ExitDefer = 75

// Defer records that the child of run id asks, should it exit ExitDefer,
// for its task to be tried again after d rather than after the agent's
// retry_backoff. ErrUnknownRun when the supervisor does not run it.
func (s *Supervisor) Defer(runID int64, d time.Duration) error {
	s.mu.Lock()
	c := s.children[runID]
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("defer run %d: %w", runID, ErrUnknownRun)
	}
	c.mu.Lock()
	c.deferFor = d
	c.mu.Unlock()
	return nil
}

// AgentOf returns the agent of live run id; ErrUnknownRun when the
// supervisor does not run it.
func (s *Supervisor) AgentOf(runID int64) (string, error) {
	s.mu.Lock()
	c := s.children[runID]
	s.mu.Unlock()
	if c == nil {
		return "", fmt.Errorf("run %d: %w", runID, ErrUnknownRun)
	}
	return c.l.Agent, nil
}

// RunRef names a live run and its task.
type RunRef struct {
	RunID, TaskID int64
}

// ErrNoProcess: the process named is gone (or was never there), so no
// run can be told from it.
var ErrNoProcess = errors.New("no such process")

// RunOfProcess returns the run that process pid belongs to: the one whose
// child's process group holds it (the child itself, or a `qd` it
// started), or, where runs have cgroups, the one whose cgroup holds it (a
// process that left the group with setsid is still in its run's cgroup).
// It is zero when no live run holds pid or pid is 0 (unknown), and
// ErrNoProcess when pid is gone: the daemon names the run behind a request
// on its socket.
func (s *Supervisor) RunOfProcess(pid int) (RunRef, error) {
	if pid <= 0 {
		return RunRef{}, nil // unknown: the platform does not say
	}
	pgid, err := syscall.Getpgid(pid)
	if err != nil {
		return RunRef{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
	}
	cgroup := s.cg.cgroupOf(pid)
	for _, c := range s.live() {
		c.mu.Lock()
		leader, cg := c.pid, c.cg
		c.mu.Unlock()
		if leader == pgid || (cgroup != "" && cg.is(cgroup)) {
			return RunRef{RunID: c.l.RunID, TaskID: c.l.TaskID}, nil
		}
	}
	return RunRef{}, nil
}

// RunOfToken returns the live run whose child was given token (its
// QD_RUN_TOKEN), zero when none was: the run ended, or the token was never
// this supervisor's.
func (s *Supervisor) RunOfToken(token string) RunRef {
	if token == "" {
		return RunRef{}
	}
	var found RunRef
	for _, c := range s.live() {
		// Every live token is compared, in constant time, so how long
		// the answer takes says nothing of which matched, or how nearly.
		if subtle.ConstantTimeCompare([]byte(c.token), []byte(token)) == 1 {
			found = RunRef{RunID: c.l.RunID, TaskID: c.l.TaskID}
		}
	}
	return found
}
