package supervisor

import (
	"time"
)

// settleWait bounds how long Drain waits for the last settlements once its
// children are gone.
const settleWait = 4 * time.Second

// Drain stops the supervisor: Start refuses new runs, every child's group
// gets SIGTERM, and Drain waits up to grace (or until hurry closes) for them
// to end. What is left gets SIGKILL, and those runs are settled at once as
// abandoned with their attempt refunded ("supervisor shutdown"). When the
// provider cannot be reached, it logs how many runs it could not release and
// when their leases expire. A second call waits for the first.
func (s *Supervisor) Drain(grace time.Duration, hurry <-chan struct{}) {
	first := false
	s.drainOnce.Do(func() { first = true })
	if !first {
		<-s.drainDone
		return
	}
	defer close(s.drainDone)
	s.mu.Lock()
	s.draining = true
	s.mu.Unlock()
	rs := s.live()
	s.log.Info("draining", "runs", len(rs), "grace", grace)
	for _, r := range rs {
		r.terminate(stopShutdown, "supervisor shutdown", 0)
	}
	if !waitRuns(rs, grace, hurry, func(r *run) <-chan struct{} { return r.exited }) {
		n := 0
		for _, r := range rs {
			if !exited(r) {
				n++
				r.kill(stopShutdown, "supervisor shutdown")
			}
		}
		s.log.Warn("grace over, killed the children left", "runs", n)
	}
	if !waitRuns(rs, settleWait, nil, func(r *run) <-chan struct{} { return r.done }) {
		s.logUnreleased(rs)
	}
	s.giveUp()
	s.discardJournal()
	s.log.Info("drained")
}

// waitRuns waits up to d, or until hurry closes, for the channel that ch
// picks from every run to close.
func waitRuns(rs []*run, d time.Duration, hurry <-chan struct{}, ch func(*run) <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, r := range rs {
		select {
		case <-ch(r):
		case <-t.C:
			return false
		case <-hurry:
			return false
		}
	}
	return true
}

func (s *Supervisor) logUnreleased(rs []*run) {
	n := 0
	var last time.Time
	for _, r := range rs {
		select {
		case <-r.done:
			continue
		default:
		}
		n++
		r.mu.Lock()
		if r.hb.expires.After(last) {
			last = r.hb.expires
		}
		r.mu.Unlock()
	}
	s.log.Error("could not release runs; their leases expire on their own", "runs", n,
		"lease_expires_by", last.Round(0).Format(time.RFC3339))
}
