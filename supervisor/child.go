package supervisor

import (
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
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
	// token is the run's secret, QD_RUN_TOKEN in the child's environment:
	// it proves the run on the daemon's socket (RunOfToken). It is never
	// logged nor stored.
	token string

	cmd *exec.Cmd
	// workdir is the run's fresh working directory, "" without one; set
	// before the child starts.
	workdir string
	// resultFile is $QD_RESULT, parentsFile $QD_PARENT_RESULTS ("" when
	// the task waited for none), resultsDir the directory of both when it
	// is not the workdir and the run's own; sharedResults when both are in
	// the shared results directory. Set before the child starts.
	resultFile, parentsFile, resultsDir string
	sharedResults                       bool
	// cg is the run's cgroup, nil when it has none, and cgGen the run's
	// generation in it (runCgroup.liveCPU); both are set under mu before
	// the child starts and never change after.
	cg      *runCgroup
	cgGen   int
	pidfd   int // the child's pidfd until wait closes it; -1 when none
	out     *output
	logFile *os.File // nil until the first output
	// streamsFile is the stream record, nil until stderr output.
	streamsFile *os.File
	stdin       *os.File    // our end of the child's stdin
	pipes       [2]*os.File // our ends of stdout and stderr
	outDone     chan struct{}
	exited      chan struct{} // closed when the child has exited
	done        chan struct{} // closed when the run is settled and forgotten
	// settling is set once the run's settlement is on its way: a heartbeat
	// refused as lease lost after that was overtaken by it, not a loss.
	settling atomic.Bool

	mu         sync.Mutex
	result     []byte // sent through the socket (SetResult)
	pid        int
	reason     stopReason // why it is being stopped; see replaces
	reasonText string
	lastWords  string        // with a timeout or a stall: its output's last line as it was stopped
	stop       stopState     // how far its group has been signalled; see next
	grace      time.Duration // of the last SIGTERM asked for
	killTimer  *time.Timer   // armed with SIGTERM, stopped with SIGKILL
	hb         beatState
	// deferFor is the delay the child asked for (`qd defer`) should it
	// exit ExitDefer; zero: the agent's retry_backoff.
	deferFor time.Duration
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
// after grace (never, when zero: the caller escalates).
func (c *child) terminate(reason stopReason, text string, grace time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason.replaces(c.reason) && (reason == stopTimeout || reason == stopStall) {
		// What the agent said last before it was stopped, not what it
		// says in answer to the SIGTERM.
		c.lastWords = c.out.why()
	}
	c.setReason(reason, text)
	c.grace = grace
	c.stepLocked(askTerm)
}

// kill ends the child's group at once with SIGKILL.
func (c *child) kill(reason stopReason, text string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setReason(reason, text)
	c.stepLocked(askKill)
}

func (c *child) setReason(reason stopReason, text string) {
	if reason.replaces(c.reason) {
		c.reason, c.reasonText = reason, text
	}
}

// setPID records the started child's pid and sends the stop asked for
// while it was starting, if any.
func (c *child) setPID(pid int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pid = pid
	c.stepLocked(gotPID)
}

// graceIsOver is the SIGKILL timer, armed for grace with SIGTERM.
func (c *child) graceIsOver(grace time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if exited(c) {
		return // reap kills what is left of the group
	}
	if c.stepLocked(graceOver) != 0 {
		c.log.Warn("child ignored SIGTERM, escalated to SIGKILL", "grace", grace)
	}
}

// reapGroup kills what is left of the group once the child has exited, and
// stops all further signals to it: the child is reaped (where waitExited
// could keep it unreaped, only now), and its pid may be reused.
func (c *child) reapGroup() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stepLocked(reap)
}

// stepLocked moves c's stop state by e, as the table of stopState says, and
// sends the signal of the step; it returns that signal (0: none).
func (c *child) stepLocked(e stopEvent) syscall.Signal {
	st := c.stop.next(e)
	c.stop = st.to
	switch st.sig {
	case syscall.SIGTERM:
		c.signalLocked(syscall.SIGTERM)
		if grace := c.grace; grace > 0 {
			c.killTimer = time.AfterFunc(grace, func() { c.graceIsOver(grace) })
		}
	case syscall.SIGKILL:
		if c.killTimer != nil {
			c.killTimer.Stop()
		}
		c.signalLocked(syscall.SIGKILL)
	}
	return st.sig
}

func (c *child) signalLocked(sig syscall.Signal) {
	if err := syscall.Kill(-c.pid, sig); err != nil && err != syscall.ESRCH {
		c.log.Error("signal child group", "pgid", c.pid, "signal", sig.String(), "error", err)
	}
	if sig == syscall.SIGKILL && c.cg != nil {
		// Also what left the group (setsid) but not the cgroup.
		if err := c.cg.killIfFull(); err != nil {
			c.log.Error("kill the run's cgroup", "error", err)
		}
	}
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
	if c.cg != nil {
		st.CPU = c.cg.liveCPU(c.cgGen)
	}
	if w := c.out.lastWall.Load(); w != 0 {
		st.LastOutputAt = time.Unix(0, w)
	}
	return st
}
