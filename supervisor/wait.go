package supervisor

import (
	"errors"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

// wait follows the child to its end: exit, output drained (or PipeGrace
// over), rest of the group killed, child reaped (exactly once), run settled.
func (s *Supervisor) wait(c *child) {
	// Where possible, learn of the exit without reaping, so the group id
	// stays reserved until the group is killed.
	held := waitExited(c.pid, c.pidfd)
	var werr error
	if !held {
		werr = c.cmd.Wait()
	}
	close(c.exited)
	select {
	case <-c.outDone:
	case <-time.After(PipeGrace):
		for _, p := range c.pipes {
			if p != nil {
				p.SetReadDeadline(time.Now())
			}
		}
		<-c.outDone
		c.log.Warn("output still open after the child exited; a grandchild holds it, killing the group", "grace", PipeGrace)
	}
	c.reapGroup()
	if held {
		werr = c.cmd.Wait()
	}
	var use Usage
	if c.cg != nil {
		use = c.cg.end(c.log)
	}
	logErr := c.out.logErr
	if c.logFile != nil {
		if err := c.logFile.Close(); err != nil && logErr == nil {
			logErr = fmt.Errorf("close run log: %w", err)
		}
	}
	closeAll(c.streamsFile, c.stdin, c.pipes[0], c.pipes[1])
	s.unrecord(c)
	st, settle := c.settlement(werr)
	s.takeResult(c, &st)
	st.Summary = s.endWorkdir(c, st.Outcome, st.Summary)
	st.CPUTime, st.MemoryPeak = use.CPU, use.MemoryPeak
	switch {
	case logErr != nil:
		st.LogError = bound(logErr.Error())
		s.stateDir.failed(logErr, true)
	case c.logFile != nil:
		s.stateDir.wrote()
	}
	s.finish(c, st, settle)
	if logErr != nil {
		c.log.Error("run log incomplete; its output tail is stored on the run", "error", logErr)
	}
}

// finish settles c's run (unless settle is false), forgets it, and only then
// logs how it ended: a run waiting on log output would stay on the
// heartbeat list and hold its slot.
func (s *Supervisor) finish(c *child, st lease.Settlement, settle bool) {
	var err error
	if settle {
		c.settling.Store(true)
		c.mu.Lock()
		expires := c.hb.sentAt + int64(c.spec.Lease)
		c.mu.Unlock()
		err = s.settle(st, expires)
	}
	s.mu.Lock()
	if s.children[c.l.RunID] == c {
		delete(s.children, c.l.RunID)
	}
	s.mu.Unlock()
	close(c.done)
	s.poke()
	log := c.log.With("outcome", st.Outcome, "summary", st.Summary)
	if st.ExitCode != nil {
		log = log.With("exit_code", *st.ExitCode)
	}
	if st.Signal != "" {
		log = log.With("signal", st.Signal)
	}
	switch {
	case !settle:
		log.Warn("run ended without settling: its lease is lost")
	case err != nil:
		log.Error("settle run", "error", err)
	default:
		log.Info("run settled")
	}
	if s.cfg.OnDone != nil {
		s.cfg.OnDone(c.spec.Agent)
	}
	if s.cfg.OnEnd != nil {
		l := *c.l
		l.Payload = nil
		c.mu.Lock()
		reason := c.reason.String()
		c.mu.Unlock()
		s.cfg.OnEnd(End{Lease: l, Settlement: st, Reason: reason, Settled: settle && err == nil,
			Started: c.started, At: time.Now()})
	}
}

// errGaveUp: the settlement could not reach the provider in time.
var errGaveUp = errors.New("provider unreachable until the lease would expire")
