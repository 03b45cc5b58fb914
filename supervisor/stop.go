package supervisor

import (
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"time"

	"github.com/qd-run/qd/lease"
	"golang.org/x/sys/unix"
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

// A child can be asked to stop for more than one reason: a timeout, then a
// shutdown, then a lost lease. It keeps the first reason it was given unless
// a later one has a higher rank:
//
//	rank  reasons                           replaces  because
//	0     none                              -
//	1     timeout, stall, cancel, shutdown  rank 0    the first says why the child was stopped
//	2     fenced                            rank 0-1  the lease can no longer be shown to hold:
//	                                                  the run is abandoned for that, whatever
//	                                                  else was asked
//	3     lease lost                        rank 0-2  the task may be another's: nothing may
//	                                                  be settled
//
// From rank 2 on the lease is given up (leaseGone): the child gets no more
// heartbeats, and no timeout or stall is looked for, since it is being
// killed. The settlement of each reason is in settlement.
const (
	rankNone   = iota
	rankAsked  // the supervisor's own reasons to stop a child
	rankFenced // the lease can no longer be shown to hold
	rankLost   // the lease is lost
)

// stopReasons gives each reason its name (as status shows it) and rank.
var stopReasons = [...]struct {
	name string
	rank int
}{
	stopNone:      {"", rankNone},
	stopTimeout:   {"timeout", rankAsked},
	stopStall:     {"stall", rankAsked},
	stopCancel:    {"cancel", rankAsked},
	stopShutdown:  {"shutdown", rankAsked},
	stopFenced:    {"fenced", rankFenced},
	stopLeaseLost: {"lease lost", rankLost},
}

func (r stopReason) String() string { return stopReasons[r].name }

// replaces reports whether r takes the place of old, which a child was
// already stopped for: only when it outranks it.
func (r stopReason) replaces(old stopReason) bool {
	return stopReasons[r].rank > stopReasons[old].rank
}

// leaseGone reports whether r gives up the child's lease: it is killed for
// the lease, and needs no heartbeat.
func (r stopReason) leaseGone() bool { return stopReasons[r].rank >= rankFenced }

// stopState is how far a child's process group has been signalled. It moves
// only by next, as this table says (a dot: the state stays and nothing is
// sent):
//
//	state        askTerm       askKill      gotPID        graceOver    reap
//	unstarted    termPending   killPending  running       .            reaped
//	termPending  .             killPending  terming TERM  .            reaped
//	killPending  .             .            killed KILL   .            reaped
//	running      terming TERM  killed KILL  .             .            reaped KILL
//	terming      .             killed KILL  .             killed KILL  reaped KILL
//	killed       .             .            .             .            reaped KILL
//	reaped       .             .            .             .            .
//
// TERM sends SIGTERM to the group and arms the SIGKILL timer for the grace
// (none when the grace is zero: the caller escalates); KILL sends SIGKILL to
// the group and stops the timer. A term asked for again while the pid is
// pending only replaces the grace. So a stop asked for before the child has
// a pid waits in a pending state and is sent with gotPID; a kill wins over a
// term, asked before it or after; each signal is sent once; SIGKILL follows
// SIGTERM after the grace unless the child exited (graceOver is not reported
// then); and nothing leaves reaped, where the pid may already be another
// process's.
type stopState int

const (
	unstarted   stopState = iota // no pid yet, no stop asked for
	termPending                  // no pid yet; SIGTERM to be sent with it
	killPending                  // no pid yet; SIGKILL to be sent with it
	running                      // no signal sent
	terming                      // SIGTERM sent, the SIGKILL timer armed
	killed                       // SIGKILL sent
	reaped                       // the child exited and the rest of its group was killed: never signal it again
)

func (s stopState) String() string {
	return [...]string{"unstarted", "termPending", "killPending", "running", "terming", "killed", "reaped"}[s]
}

// stopEvent is what moves a stopState.
type stopEvent int

const (
	askTerm   stopEvent = iota // stop with a grace: timeout, stall, cancel, shutdown
	askKill                    // stop at once: fenced, lease lost, shutdown past its grace
	gotPID                     // the child started
	graceOver                  // the SIGKILL timer fired and the child has not exited
	reap                       // the child exited and its output is drained (or PipeGrace is over)
)

func (e stopEvent) String() string {
	return [...]string{"askTerm", "askKill", "gotPID", "graceOver", "reap"}[e]
}

// step is one move of a stopState: where to, and the signal it sends to the
// group (0: none).
type step struct {
	to  stopState
	sig syscall.Signal
}

// stopSteps is the table of stopState; a missing event leaves the state as
// it is.
var stopSteps = [...]map[stopEvent]step{
	unstarted:   {askTerm: {termPending, 0}, askKill: {killPending, 0}, gotPID: {running, 0}, reap: {reaped, 0}},
	termPending: {askKill: {killPending, 0}, gotPID: {terming, syscall.SIGTERM}, reap: {reaped, 0}},
	killPending: {gotPID: {killed, syscall.SIGKILL}, reap: {reaped, 0}},
	running:     {askTerm: {terming, syscall.SIGTERM}, askKill: {killed, syscall.SIGKILL}, reap: {reaped, syscall.SIGKILL}},
	terming:     {askKill: {killed, syscall.SIGKILL}, graceOver: {killed, syscall.SIGKILL}, reap: {reaped, syscall.SIGKILL}},
	killed:      {reap: {reaped, syscall.SIGKILL}},
	reaped:      {},
}

// next is the step e takes from s.
func (s stopState) next(e stopEvent) step {
	if st, ok := stopSteps[s][e]; ok {
		return st
	}
	return step{to: s}
}

// settlement decides how the run ended; settle is false when the lease is
// gone and nothing may be written.
func (c *child) settlement(werr error) (st lease.Settlement, settle bool) {
	code, sig, other := exitOf(werr)
	st = lease.Settlement{RunID: c.l.RunID, ClaimToken: c.l.ClaimToken, ExitCode: code, Signal: sig, OutputTail: c.out.tail()}
	c.mu.Lock()
	reason, text, lastWords, deferFor := c.reason, c.reasonText, c.lastWords, c.deferFor
	c.mu.Unlock()
	outLine, _ := c.out.lastLines()
	// Why a run went wrong is usually on stderr; what a run did, on stdout.
	why := c.out.why()
	switch {
	case reason == stopLeaseLost:
		st.Outcome, st.Summary = lease.RunAbandoned, text
		return st, false
	case reason == stopCancel:
		st.Outcome, st.Summary = lease.RunCancelled, text
	case reason == stopShutdown && !(code != nil && *code == 0):
		st.Outcome, st.Summary, st.Refund = lease.RunAbandoned, text, true
	case reason == stopTimeout || reason == stopStall:
		// The agent's own doing: the next attempt backs off like a failure.
		// The event is recorded with the settlement, for notifications.
		st.Outcome, st.Summary, st.Event = lease.RunAbandoned, text, lease.EventTimeout
		if reason == stopStall {
			st.Event = lease.EventStall
		}
		st.RetryIn = lease.Backoff(c.spec.RetryBackoff, c.l.Attempt)
	case reason == stopFenced:
		// qd's own reason (the database out of reach): claimable at once.
		st.Outcome, st.Summary = lease.RunAbandoned, text
	case other != nil:
		st.Outcome, st.Summary = lease.RunAbandoned, "wait for child: "+other.Error()
	case sig != "":
		// Killed by a signal qd did not send (a crash, the OOM killer).
		st.Outcome, st.Summary = lease.RunAbandoned, "killed by "+sig
		st.RetryIn = lease.Backoff(c.spec.RetryBackoff, c.l.Attempt)
	case *code == 0:
		st.Outcome, st.Summary = lease.RunCompleted, outLine
		if outLine == "" {
			st.Summary = "exited 0"
		}
	case *code == ExitDefer && reason == stopNone:
		return c.deferral(st, deferFor), true
	default:
		st.Outcome, st.Summary = lease.RunFailed, fmt.Sprintf("exited %d", *code)
		st.RetryIn = lease.Backoff(c.spec.RetryBackoff, c.l.Attempt)
	}
	switch {
	case why == "" || st.Outcome == lease.RunCompleted:
	case reason == stopTimeout || reason == stopStall:
		if lastWords != "" {
			st.Summary += "; last output: " + lastWords
		}
	case reason == stopNone: // failed, or killed by a signal qd did not send
		st.Summary += ": " + why
	}
	st.Summary = bound(st.Summary)
	return st, true
}

// deferral is the settlement of a child that exited ExitDefer: its task
// is tried again after d (`qd defer`), else after the agent's
// retry_backoff, its attempt given back, unless it has deferred
// max_deferrals times already (the provider then fails the run).
func (c *child) deferral(st lease.Settlement, d time.Duration) lease.Settlement {
	if d <= 0 {
		d = c.spec.RetryBackoff
	}
	if d <= 0 {
		d = lease.DefaultBackoffBase
	}
	max := c.spec.MaxDeferrals
	if max <= 0 {
		max = lease.DefaultMaxDeferrals
	}
	df := lease.Deferral(c.l, d, max, bound(fmt.Sprintf("deferred for %s (exit %d)", d, ExitDefer)))
	df.ExitCode, df.OutputTail = st.ExitCode, st.OutputTail
	return df
}

// exitOf reads Wait's result: an exit code, or a signal name, or an error
// that is neither.
func exitOf(werr error) (code *int, sig string, other error) {
	var ee *exec.ExitError
	switch {
	case werr == nil:
		zero := 0
		return &zero, "", nil
	case errors.As(werr, &ee):
		ws, ok := ee.Sys().(syscall.WaitStatus)
		if ok && ws.Signaled() {
			return nil, unix.SignalName(ws.Signal()), nil
		}
		c := ee.ExitCode()
		return &c, "", nil
	}
	return nil, "", werr
}
