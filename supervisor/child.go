package supervisor

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/qd-run/qd/lease"
)

// child is the supervisor's handle of one run: the process it runs as, its
// output, its lease bookkeeping and how far it has been stopped. Fields above
// mu are set before the process starts and never change.
type child struct {
	l       *lease.Lease
	spec    Spec
	log     hclog.Logger
	started time.Time // wall clock, for display
	startNs int64     // supervisor mono

	cmd     *exec.Cmd
	pidfd   int // the child's pidfd until wait closes it; -1 when none
	out     *output
	logFile *os.File    // nil until the first output
	stdin   *os.File    // our end of the child's stdin
	pipes   [2]*os.File // our ends of stdout and stderr
	outDone chan struct{}
	exited  chan struct{} // closed when the child has exited
	done    chan struct{} // closed when the run is settled and forgotten

	mu         sync.Mutex
	pid        int
	reason     stopReason
	reasonText string
	wantTerm   bool
	wantKill   bool
	termSent   bool
	killSent   bool
	killAfter  time.Duration
	killTimer  *time.Timer
	groupDone  bool // the group was killed after the child exited
	hb         beatState
}

// beatState is the lease bookkeeping of a run, in supervisor mono ns.
type beatState struct {
	sentAt   int64 // when the last successful heartbeat (or the claim) was sent
	deadline int64 // kill the child if no heartbeat got through by then
	next     int64 // next heartbeat due
	ackAt    int64 // when the last heartbeat answer arrived
	inFlight bool
	expires  time.Time // by the provider's clock
}

// terminate ends the child for reason: SIGTERM to its group now, SIGKILL
// after killAfter (never, when zero: the caller escalates).
func (c *child) terminate(reason stopReason, text string, killAfter time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setReason(reason, text)
	c.wantTerm, c.killAfter = true, killAfter
	c.applyLocked()
}

// kill ends the child's group at once with SIGKILL.
func (c *child) kill(reason stopReason, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setReason(reason, text)
	c.wantKill = true
	c.applyLocked()
}

func (c *child) setReason(reason stopReason, text string) {
	if reason.replaces(c.reason) {
		c.reason, c.reasonText = reason, text
	}
}

// applyLocked sends the signals asked for once the child has a pid.
func (c *child) applyLocked() {
	if c.pid == 0 || c.groupDone {
		return
	}
	if c.wantKill && !c.killSent {
		c.killSent = true
		if c.killTimer != nil {
			c.killTimer.Stop()
		}
		c.signalLocked(syscall.SIGKILL)
		return
	}
	if c.wantTerm && !c.termSent && !c.killSent {
		c.termSent = true
		c.signalLocked(syscall.SIGTERM)
		if c.killAfter > 0 {
			c.killTimer = time.AfterFunc(c.killAfter, c.escalate)
		}
	}
}

func (c *child) escalate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	select {
	case <-c.exited:
		return
	default:
	}
	c.wantKill = true
	c.applyLocked()
	c.log.Warn("child ignored SIGTERM, escalated to SIGKILL", "grace", c.killAfter)
}

func (c *child) signalLocked(sig syscall.Signal) {
	if err := syscall.Kill(-c.pid, sig); err != nil && err != syscall.ESRCH {
		c.log.Error("signal child group", "pgid", c.pid, "signal", sig.String(), "error", err)
	}
}

// reapGroup kills what is left of the group once the child has exited, and
// stops all further signals to it.
func (c *child) reapGroup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.killTimer != nil {
		c.killTimer.Stop()
	}
	if c.pid != 0 && !c.groupDone {
		c.signalLocked(syscall.SIGKILL)
	}
	c.groupDone = true
}

// status copies the run's state; now is supervisor mono ns.
func (c *child) status(now int64) RunStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := RunStatus{
		RunID: c.l.RunID, TaskID: c.l.TaskID, Lane: c.l.Lane, Agent: c.l.Agent,
		Attempt: c.l.Attempt, MaxAttempts: c.l.MaxAttempts, PID: c.pid,
		Started:        c.started,
		SilentSeconds:  time.Duration(now - c.hb.ackAt).Seconds(),
		LeaseExpiresAt: c.hb.expires,
		LeaseLeft:      max(0, time.Duration(c.hb.sentAt+int64(c.spec.Lease)-now)),
		Stopping:       c.reason.String(),
	}
	if w := c.out.lastWall.Load(); w != 0 {
		st.LastOutputAt = time.Unix(0, w)
	}
	return st
}
