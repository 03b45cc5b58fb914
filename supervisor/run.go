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

// stopReason says why the supervisor ended a child, if it did.
type stopReason int

const (
	stopNone stopReason = iota
	stopTimeout
	stopStall
	stopCancel
	stopShutdown
	stopFenced    // no heartbeat got through before the local deadline
	stopLeaseLost // a heartbeat said the lease is gone
)

func (r stopReason) String() string {
	return [...]string{"", "timeout", "stall", "cancel", "shutdown", "fenced", "lease lost"}[r]
}

// overrides reports whether r replaces an earlier reason: losing the lease
// matters more than anything, because then nothing may be settled.
func (r stopReason) overrides(old stopReason) bool {
	return old == stopNone || (r >= stopFenced && r > old)
}

// run is the handle of one child. Fields above mu are set before the child
// starts and never change.
type run struct {
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
func (r *run) terminate(reason stopReason, text string, killAfter time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setReason(reason, text)
	r.wantTerm, r.killAfter = true, killAfter
	r.applyLocked()
}

// kill ends the child's group at once with SIGKILL.
func (r *run) kill(reason stopReason, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.setReason(reason, text)
	r.wantKill = true
	r.applyLocked()
}

func (r *run) setReason(reason stopReason, text string) {
	if reason.overrides(r.reason) {
		r.reason, r.reasonText = reason, text
	}
}

// applyLocked sends the signals asked for once the child has a pid.
func (r *run) applyLocked() {
	if r.pid == 0 || r.groupDone {
		return
	}
	if r.wantKill && !r.killSent {
		r.killSent = true
		if r.killTimer != nil {
			r.killTimer.Stop()
		}
		r.signalLocked(syscall.SIGKILL)
		return
	}
	if r.wantTerm && !r.termSent && !r.killSent {
		r.termSent = true
		r.signalLocked(syscall.SIGTERM)
		if r.killAfter > 0 {
			r.killTimer = time.AfterFunc(r.killAfter, r.escalate)
		}
	}
}

func (r *run) escalate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.exited:
		return
	default:
	}
	r.wantKill = true
	r.applyLocked()
	r.log.Warn("child ignored SIGTERM, escalated to SIGKILL", "grace", r.killAfter)
}

func (r *run) signalLocked(sig syscall.Signal) {
	if err := syscall.Kill(-r.pid, sig); err != nil && err != syscall.ESRCH {
		r.log.Error("signal child group", "pgid", r.pid, "signal", sig.String(), "error", err)
	}
}

// reapGroup kills what is left of the group once the child has exited, and
// stops all further signals to it.
func (r *run) reapGroup() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.killTimer != nil {
		r.killTimer.Stop()
	}
	if r.pid != 0 && !r.groupDone {
		r.signalLocked(syscall.SIGKILL)
	}
	r.groupDone = true
}

// status copies the run's state; now is supervisor mono ns.
func (r *run) status(now int64) RunStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	st := RunStatus{
		RunID: r.l.RunID, TaskID: r.l.TaskID, Lane: r.l.Lane, Agent: r.l.Agent,
		Attempt: r.l.Attempt, MaxAttempts: r.l.MaxAttempts, PID: r.pid,
		Started:        r.started,
		SilentSeconds:  time.Duration(now - r.hb.ackAt).Seconds(),
		LeaseExpiresAt: r.hb.expires,
		LeaseLeft:      max(0, time.Duration(r.hb.sentAt+int64(r.spec.Lease)-now)),
		Stopping:       r.reason.String(),
	}
	if w := r.out.lastWall.Load(); w != 0 {
		st.LastOutputAt = time.Unix(0, w)
	}
	return st
}
