package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

// maxTick is the longest the loop sleeps between passes.
const maxTick = time.Second

// beatReply is the answer to one batched heartbeat.
type beatReply struct {
	runs    []*run
	sentAt  int64
	results []lease.BeatResult
	err     error
}

// Run is the heartbeat loop: one pass at least every second, one Heartbeat
// call per pass for every run that is due, and the timeouts, stalls and
// local lease deadlines enforced. Provider errors are logged and retried,
// never returned. When ctx is done Run drains (at once, unless Drain was
// called before) and returns nil once the drain has finished. Call Drain
// before cancelling ctx to give children a grace.
func (s *Supervisor) Run(ctx context.Context) error {
	replies := make(chan beatReply, 1)
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
		switch {
		case !due || inFlight:
		case now < retryAt:
			next = min(next, retryAt)
		default:
			inFlight = true
			s.send(batch, replies)
		}
		timer.Reset(min(max(time.Duration(next-now), 5*time.Millisecond), maxTick))
	}
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
	for _, r := range s.live() {
		r.mu.Lock()
		deadline, held := r.hb.deadline, r.reason < stopFenced
		r.mu.Unlock()
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
func (s *Supervisor) pass(now int64) (batch []*run, due bool, next int64) {
	next = now + int64(maxTick)
	for _, r := range s.live() {
		when, state := s.check(r, now)
		next = min(next, when)
		if state != beatLater {
			batch = append(batch, r)
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

func (s *Supervisor) live() []*run {
	s.mu.Lock()
	defer s.mu.Unlock()
	rs := make([]*run, 0, len(s.runs))
	for _, r := range s.runs {
		rs = append(rs, r)
	}
	return rs
}

// check looks at one run: kills it when its lease would run out, stops it on
// timeout or stall, and says whether a heartbeat is due and when the run
// next needs a pass (mono ns).
func (s *Supervisor) check(r *run, now int64) (next int64, state int) {
	r.mu.Lock()
	hb, reason, pid := r.hb, r.reason, r.pid
	r.mu.Unlock()
	next = now + int64(maxTick)
	// A run whose lease is given up needs no more heartbeats.
	if !hb.inFlight && reason < stopFenced {
		switch {
		case now >= hb.next:
			state = beatDue
		case now >= hb.next-int64(r.spec.Heartbeat/2):
			state = beatEarly
			next = hb.next
		default:
			next = hb.next
		}
	}
	if exited(r) || pid == 0 {
		return next, state
	}
	sp := r.spec
	switch {
	case reason >= stopFenced:
		return next, state
	case now >= hb.deadline:
		s.fence(r, hb, now)
		return next, state
	case reason != stopNone:
	case sp.Timeout > 0 && now-r.startNs >= int64(sp.Timeout):
		r.terminate(stopTimeout, "timed out after "+sp.Timeout.String(), sp.KillGrace)
		r.log.Warn("child timed out", "timeout", sp.Timeout)
	case sp.StallTimeout > 0 && now-r.lastOutput() >= int64(sp.StallTimeout):
		r.terminate(stopStall, "stalled: no output for "+sp.StallTimeout.String(), sp.KillGrace)
		r.log.Warn("child stalled: no output", "stall_timeout", sp.StallTimeout)
	default:
		if sp.Timeout > 0 {
			next = min(next, r.startNs+int64(sp.Timeout))
		}
		if sp.StallTimeout > 0 {
			next = min(next, r.lastOutput()+int64(sp.StallTimeout))
		}
	}
	return min(next, hb.deadline), state
}

// fence kills the child of a run whose local deadline has passed, and only
// then logs: nothing may stand between the deadline and the kill. When even
// the lease is already over (the daemon was paused or starved past it),
// another run of the task may have been running alongside, and the window
// is reported.
func (s *Supervisor) fence(r *run, hb beatState, now int64) {
	silent := time.Duration(now - hb.ackAt).Round(time.Millisecond)
	if over := time.Duration(now - (hb.sentAt + int64(r.spec.Lease))); over > 0 {
		over = over.Round(time.Millisecond)
		r.kill(stopFenced, fmt.Sprintf("killed: lease expired %s before the child could be killed; runs may have overlapped", over))
		r.log.Error("lease expired before the child could be killed (daemon paused or starved); another run of the task may have overlapped",
			"silent", silent, "overlap_up_to", over)
		return
	}
	r.kill(stopFenced, fmt.Sprintf("killed: no heartbeat answer for %s, lease would expire", silent))
	r.log.Error("no heartbeat got through; killed the child before its lease expires", "silent", silent)
}

// lastOutput is when the child last wrote, or when it started.
func (r *run) lastOutput() int64 {
	if t := r.out.lastAt.Load(); t != 0 {
		return t
	}
	return r.startNs
}

func exited(r *run) bool {
	select {
	case <-r.exited:
		return true
	default:
		return false
	}
}

// send marks runs in flight and sends their heartbeat in the background, so
// that a slow provider never stops the loop from enforcing deadlines.
func (s *Supervisor) send(runs []*run, replies chan<- beatReply) {
	for _, r := range runs {
		r.mu.Lock()
		r.hb.inFlight = true
		r.mu.Unlock()
	}
	go s.beat(runs, replies)
}

// beat sends one batched heartbeat for runs.
func (s *Supervisor) beat(runs []*run, replies chan<- beatReply) {
	beats := make([]lease.Beat, len(runs))
	now := s.mono()
	wait := 10 * time.Second
	for i, r := range runs {
		r.mu.Lock()
		beats[i] = lease.Beat{RunID: r.l.RunID, Lease: r.spec.Lease, PID: r.pid}
		wait = min(wait, time.Duration(r.hb.deadline-now))
		r.mu.Unlock()
		if w := r.out.lastWall.Load(); w != 0 {
			beats[i].LastOutputAt = time.Unix(0, w)
		}
	}
	ctx, cancel := context.WithTimeout(s.stopCtx, max(wait, time.Second))
	defer cancel()
	res, err := s.cfg.Provider.Heartbeat(ctx, beats...)
	replies <- beatReply{runs: runs, sentAt: now, results: res, err: err}
}

// applyBeats records a heartbeat answer; false when the call failed.
func (s *Supervisor) applyBeats(rep beatReply) bool {
	byID := make(map[int64]lease.BeatResult, len(rep.results))
	for _, res := range rep.results {
		byID[res.RunID] = res
	}
	if rep.err != nil {
		s.log.Error("heartbeat", "runs", len(rep.runs), "error", rep.err)
	}
	now := s.mono()
	for _, r := range rep.runs {
		res, ok := byID[r.l.RunID]
		switch {
		case rep.err != nil:
		case !ok:
			r.log.Error("heartbeat: provider gave no answer for the run")
			r.retryBeat(now)
		case res.Err == nil:
			r.acked(rep.sentAt, now, res)
		case errors.Is(res.Err, lease.ErrLeaseLost):
			r.kill(stopLeaseLost, "lease lost")
			r.log.Error("lease lost; killed the child's group", "error", res.Err)
		default:
			r.log.Error("heartbeat", "error", res.Err)
			r.retryBeat(now)
		}
		r.mu.Lock()
		r.hb.inFlight = false
		r.mu.Unlock()
	}
	return rep.err == nil
}

// acked records a successful heartbeat sent at sentAt.
func (r *run) acked(sentAt, now int64, res lease.BeatResult) {
	r.mu.Lock()
	sp := r.spec
	r.hb.sentAt, r.hb.ackAt, r.hb.expires = sentAt, now, res.LeaseExpiresAt
	r.hb.deadline = sentAt + int64(sp.Lease-sp.margin())
	r.hb.next = sentAt + int64(sp.Heartbeat)
	cancel := res.CancelRequested && r.reason == stopNone
	r.mu.Unlock()
	if cancel && !exited(r) {
		r.terminate(stopCancel, "cancelled", sp.KillGrace)
		r.log.Info("cancel requested; stopping the child", "grace", sp.KillGrace)
	}
}

// retryBeat puts off the next heartbeat of a run the provider refused for a
// reason other than a lost lease.
func (r *run) retryBeat(now int64) {
	r.mu.Lock()
	r.hb.next = now + int64(retryDelay(1))
	r.mu.Unlock()
}
