package supervisor

import (
	"context"
	"time"
)

// cancelPollEvery is how often, at most, the supervisor asks the provider
// whether any of its live runs has a cancel request, while it has any: a
// cancel made on another host stops the child within about this long,
// instead of at the run's next heartbeat.
const cancelPollEvery = time.Second

// cancelPoll is the state of the cancel poll; only the loop touches it.
type cancelPoll struct {
	next     int64 // mono ns: no poll before then
	inFlight bool
}

// pollCancels starts one CancelRequested call for every live run when one
// is due, in the background; the answer comes back on done.
func (s *Supervisor) pollCancels(now int64, p *cancelPoll, done chan<- []int64) {
	if p.inFlight || now < p.next {
		return
	}
	var ids []int64
	for _, c := range s.live() {
		c.mu.Lock()
		asked := c.reason != stopNone
		c.mu.Unlock()
		if !asked && !exited(c) {
			ids = append(ids, c.l.RunID)
		}
	}
	if len(ids) == 0 {
		return
	}
	p.inFlight, p.next = true, now+int64(cancelPollEvery)
	go func() {
		ctx, cancel := context.WithTimeout(s.stopCtx, 5*time.Second)
		defer cancel()
		got, err := s.cfg.Provider.CancelRequested(ctx, ids)
		if err != nil {
			s.log.Debug("poll for cancel requests", "runs", len(ids), "error", err)
		}
		done <- got
	}()
}

// CancelTask stops at once the child of the run of task taskID, if this
// supervisor runs one: the operator has marked the task cancelled (`qd
// cancel` on this host, through the socket). It returns the run stopped,
// or 0 when none here runs the task.
func (s *Supervisor) CancelTask(taskID int64) (runID int64) {
	for _, c := range s.live() {
		if c.l.TaskID == taskID {
			s.cancel(c, "cancel requested through the socket")
			return c.l.RunID
		}
	}
	return 0
}

// cancelRuns stops the children of the runs named.
func (s *Supervisor) cancelRuns(runIDs []int64) {
	for _, id := range runIDs {
		s.mu.Lock()
		c := s.children[id]
		s.mu.Unlock()
		if c != nil {
			s.cancel(c, "cancel request seen by the poll")
		}
	}
}

// cancel terminates c as cancelled, unless it is already stopping or gone.
func (s *Supervisor) cancel(c *child, how string) {
	c.mu.Lock()
	fresh := c.reason == stopNone
	c.mu.Unlock()
	if !fresh || exited(c) {
		return
	}
	c.terminate(stopCancel, "cancelled", c.spec.KillGrace)
	c.log.Info("cancel requested; stopping the child", "how", how, "grace", c.spec.KillGrace)
}
