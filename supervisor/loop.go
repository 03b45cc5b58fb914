package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

// maxTick is the longest the loop sleeps between passes while a run is
// live.
const maxTick = time.Second

// DefaultIdlePass is the longest the loop sleeps while no run is live,
// unless Config.IdlePass says otherwise.
const DefaultIdlePass = 30 * time.Second

// beatReply is the answer to one batched heartbeat.
type beatReply struct {
	children []*child
	sentAt   int64
	results  []lease.BeatResult
	err      error
}

// Loop is the supervisor's heartbeat loop, the actor the daemon runs for it:
// one pass at least every second while a run is live, and at least every
// Config.IdlePass while none is (Config.OnLoop is called on each), one
// Provider.Heartbeat call per pass for every run that is due, and the
// timeouts, stalls and local lease deadlines enforced. Provider errors are
// logged and retried, never returned. When ctx is done Loop drains (at once, unless Drain was
// called before) and returns nil once the drain has finished. Call Drain
// before cancelling ctx to give children a grace.
func (s *Supervisor) Loop(ctx context.Context) error {
	replies := make(chan beatReply, 1)
	cancels := make(chan []int64, 1)
	var poll cancelPoll
	inFlight, failures := false, 0
	var retryAt int64
	timer := time.NewTimer(0)
	defer timer.Stop()
	ctxDone, drainDone := ctx.Done(), s.drainDone
	for {
		select {
		case <-ctxDone:
			ctxDone = nil
			go s.Drain(0, nil)
		case <-drainDone:
			drainDone = nil
		case rep := <-replies:
			inFlight = false
			if s.applyBeats(rep) {
				failures = 0
			} else {
				failures++
				retryAt = s.retryAt(s.mono(), failures)
			}
		case ids := <-cancels:
			poll.inFlight = false
			s.cancelRuns(ids)
		case <-timer.C:
		case <-s.wake:
		}
		if ctxDone == nil && drainDone == nil {
			return nil
		}
		if s.cfg.OnLoop != nil {
			s.cfg.OnLoop()
		}
		now := s.mono()
		batch, due, next := s.pass(now)
		s.pollCancels(now, &poll, cancels)
		switch {
		case !due || inFlight:
		case now < retryAt:
			next = min(next, retryAt)
		default:
			inFlight = true
			s.send(batch, replies)
		}
		timer.Reset(max(time.Duration(next-now), 5*time.Millisecond))
	}
}

func (s *Supervisor) idlePass() time.Duration {
	if s.cfg.IdlePass > 0 {
		return s.cfg.IdlePass
	}
	return DefaultIdlePass
}

func retryDelay(failures int) time.Duration {
	return min(250*time.Millisecond<<min(failures, 5), 5*time.Second)
}

// Near a run's local deadline, heartbeats are retried at least lastTry
// before it and then every minRetry, so that a database back in time saves
// the run whatever the backoff had grown to.
const (
	lastTry  = 500 * time.Millisecond
	minRetry = 100 * time.Millisecond
)

// retryAt is when to try again after failures failed heartbeats: the
// backoff, but never past the last chance of a run whose lease is still
// held.
func (s *Supervisor) retryAt(now int64, failures int) int64 {
	at := now + int64(retryDelay(failures))
	for _, c := range s.live() {
		c.mu.Lock()
		deadline, held := c.hb.deadline, !c.reason.leaseGone()
		c.mu.Unlock()
		if held {
			at = min(at, max(now+int64(minRetry), deadline-int64(lastTry)))
		}
	}
	return at
}

// pass enforces deadlines, timeouts and stalls, and says whether a
// heartbeat is due, which runs it should carry and when the next pass is
// needed (mono ns). A due heartbeat also carries the runs that are within
// half an interval of due, so runs started at different times fall into
// one batch per interval instead of one call each.
func (s *Supervisor) pass(now int64) (batch []*child, due bool, next int64) {
	live := s.live()
	next = now + int64(maxTick)
	if len(live) == 0 {
		next = now + int64(s.idlePass())
	}
	for _, c := range live {
		when, state := s.check(c, now)
		next = min(next, when)
		if state != beatLater {
			batch = append(batch, c)
		}
		due = due || state == beatDue
	}
	return batch, due, next
}

// What check says about a run's heartbeat in this pass.
const (
	beatLater = iota // not yet, or in flight, or no longer wanted
	beatEarly        // may go with a batch
	beatDue          // must go now
)

func (s *Supervisor) live() []*child {
	s.mu.Lock()
	defer s.mu.Unlock()
	cs := make([]*child, 0, len(s.children))
	for _, c := range s.children {
		cs = append(cs, c)
	}
	return cs
}

// check looks at one run: kills it when its lease would run out, stops it on
// timeout or stall, and says whether a heartbeat is due and when the run
// next needs a pass (mono ns).
func (s *Supervisor) check(c *child, now int64) (next int64, state int) {
	c.mu.Lock()
	hb, reason, pid := c.hb, c.reason, c.pid
	c.mu.Unlock()
	next = now + int64(maxTick)
	// A run whose lease is given up needs no more heartbeats.
	if !hb.inFlight && !reason.leaseGone() {
		switch {
		case now >= hb.next:
			state = beatDue
		case now >= hb.next-int64(c.spec.Heartbeat/2):
			state = beatEarly
			next = hb.next
		default:
			next = hb.next
		}
	}
	if exited(c) || pid == 0 {
		return next, state
	}
	sp := c.spec
	switch {
	case reason.leaseGone():
		return next, state
	case now >= hb.deadline && hasExited(pid):
		// The child ended (during a pause of the daemon, say) and its
		// waiter has yet to see it: its exit status decides the run, and
		// a completion is sent as one, however late (settle_runs takes
		// it when no other run was claimed), not fenced into an abandon.
		return next, state
	case now >= hb.deadline:
		s.fence(c, hb, now)
		return next, state
	case reason != stopNone:
	case sp.Timeout > 0 && now-c.startNs >= int64(sp.Timeout):
		c.terminate(stopTimeout, "timed out after "+sp.Timeout.String(), sp.KillGrace)
		c.log.Warn("child timed out", "timeout", sp.Timeout)
	case sp.StallTimeout > 0 && now-c.lastOutput() >= int64(sp.StallTimeout):
		c.terminate(stopStall, "stalled: no output for "+sp.StallTimeout.String(), sp.KillGrace)
		c.log.Warn("child stalled: no output", "stall_timeout", sp.StallTimeout)
	default:
		if sp.Timeout > 0 {
			next = min(next, c.startNs+int64(sp.Timeout))
		}
		if sp.StallTimeout > 0 {
			next = min(next, c.lastOutput()+int64(sp.StallTimeout))
		}
	}
	return min(next, hb.deadline), state
}

// fence kills the child of a run whose local deadline has passed, and only
// then logs: nothing may stand between the deadline and the kill. When even
// the lease is already over (the daemon was paused or starved past it),
// another run of the task may have been running alongside, and the window
// is reported.
func (s *Supervisor) fence(c *child, hb beatState, now int64) {
	silent := time.Duration(now - hb.ackAt).Round(time.Millisecond)
	if over := time.Duration(now - (hb.sentAt + int64(c.spec.Lease))); over > 0 {
		over = over.Round(time.Millisecond)
		c.kill(stopFenced, fmt.Sprintf("killed: lease expired %s before the child could be killed; runs may have overlapped", over))
		c.log.Error("lease expired before the child could be killed (daemon paused or starved); another run of the task may have overlapped",
			"silent", silent, "overlap_up_to", over)
		return
	}
	c.kill(stopFenced, fmt.Sprintf("killed: no heartbeat answer for %s, lease would expire", silent))
	c.log.Error("no heartbeat got through; killed the child before its lease expires", "silent", silent)
}

// lastOutput is when the child last wrote, or when it started.
func (c *child) lastOutput() int64 {
	if t := c.out.lastAt.Load(); t != 0 {
		return t
	}
	return c.startNs
}

func exited(c *child) bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// send marks runs in flight and sends their heartbeat in the background, so
// that a slow provider never stops the loop from enforcing deadlines.
func (s *Supervisor) send(batch []*child, replies chan<- beatReply) {
	for _, c := range batch {
		c.mu.Lock()
		c.hb.inFlight = true
		c.mu.Unlock()
	}
	go s.beat(batch, replies)
}

// beat sends one batched heartbeat for runs.
func (s *Supervisor) beat(batch []*child, replies chan<- beatReply) {
	beats := make([]lease.Beat, len(batch))
	now := s.mono()
	wait := 10 * time.Second
	for i, c := range batch {
		c.mu.Lock()
		beats[i] = lease.Beat{RunID: c.l.RunID, ClaimToken: c.l.ClaimToken, Lease: c.spec.Lease, PID: c.pid}
		wait = min(wait, time.Duration(c.hb.deadline-now))
		c.mu.Unlock()
		if w := c.out.lastWall.Load(); w != 0 {
			beats[i].LastOutputAt = time.Unix(0, w)
		}
	}
	ctx, cancel := context.WithTimeout(s.stopCtx, max(wait, time.Second))
	defer cancel()
	sent := time.Now()
	res, err := s.cfg.Provider.Heartbeat(ctx, beats...)
	if s.cfg.OnHeartbeat != nil {
		s.cfg.OnHeartbeat(len(beats), time.Since(sent), err)
	}
	replies <- beatReply{children: batch, sentAt: now, results: res, err: err}
}

// applyBeats records a heartbeat answer; false when the call failed.
func (s *Supervisor) applyBeats(rep beatReply) bool {
	byID := make(map[int64]lease.BeatResult, len(rep.results))
	for _, res := range rep.results {
		byID[res.RunID] = res
	}
	if rep.err != nil {
		s.log.Error("heartbeat", "runs", len(rep.children), "error", rep.err)
	}
	now := s.mono()
	for _, c := range rep.children {
		res, ok := byID[c.l.RunID]
		switch {
		case rep.err != nil:
		case !ok:
			c.log.Error("heartbeat: provider gave no answer for the run")
			c.retryBeat(now)
		case res.Err == nil:
			c.acked(rep.sentAt, now, res)
		case errors.Is(res.Err, lease.ErrLeaseLost) && c.settling.Load():
			// The heartbeat reached the database after the run's own
			// settlement: the child has exited and its run has ended.
			c.log.Debug("heartbeat overtaken by the run's settlement")
		case errors.Is(res.Err, lease.ErrLeaseLost):
			c.kill(stopLeaseLost, "lease lost")
			c.log.Error("lease lost; killed the child's group", "error", res.Err)
		default:
			c.log.Error("heartbeat", "error", res.Err)
			c.retryBeat(now)
		}
		c.mu.Lock()
		c.hb.inFlight = false
		c.mu.Unlock()
	}
	return rep.err == nil
}

// acked records a successful heartbeat sent at sentAt.
func (c *child) acked(sentAt, now int64, res lease.BeatResult) {
	c.mu.Lock()
	sp := c.spec
	c.hb.sentAt, c.hb.ackAt, c.hb.expires = sentAt, now, res.LeaseExpiresAt
	c.hb.deadline = sentAt + int64(sp.Lease-sp.margin())
	c.hb.next = sentAt + int64(sp.Heartbeat)
	cancel := res.CancelRequested && c.reason == stopNone
	c.mu.Unlock()
	if cancel && !exited(c) {
		c.terminate(stopCancel, "cancelled", sp.KillGrace)
		c.log.Info("cancel requested; stopping the child", "grace", sp.KillGrace)
	}
}

// retryBeat puts off the next heartbeat of a run the provider refused for a
// reason other than a lost lease.
func (c *child) retryBeat(now int64) {
	c.mu.Lock()
	c.hb.next = now + int64(retryDelay(1))
	c.mu.Unlock()
}
