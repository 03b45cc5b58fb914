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
	s.draining, s.drainedAt = true, time.Now()
	s.mu.Unlock()
	cs := s.live()
	s.log.Info("draining", "runs", len(cs), "grace", grace)
	for _, c := range cs {
		c.terminate(stopShutdown, "supervisor shutdown", 0)
	}
	if !waitChildren(cs, grace, hurry, func(c *child) <-chan struct{} { return c.exited }) {
		n := 0
		for _, c := range cs {
			if !exited(c) {
				n++
				c.kill(stopShutdown, "supervisor shutdown")
			}
		}
		s.log.Warn("grace over, killed the children left", "runs", n)
	}
	if !waitChildren(cs, settleWait, nil, func(c *child) <-chan struct{} { return c.done }) {
		s.logUnreleased(cs)
	}
	s.giveUp()
	s.discardJournal()
	if s.cg != nil {
		s.cg.close()
	}
	s.log.Info("drained")
}

// waitChildren waits up to d, or until hurry closes, for the channel that ch
// picks from every run to close.
func waitChildren(cs []*child, d time.Duration, hurry <-chan struct{}, ch func(*child) <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, c := range cs {
		select {
		case <-ch(c):
		case <-t.C:
			return false
		case <-hurry:
			return false
		}
	}
	return true
}

func (s *Supervisor) logUnreleased(cs []*child) {
	n := 0
	var last time.Time
	for _, c := range cs {
		select {
		case <-c.done:
			continue
		default:
		}
		n++
		c.mu.Lock()
		if c.hb.expires.After(last) {
			last = c.hb.expires
		}
		c.mu.Unlock()
	}
	s.log.Error("could not release runs; their leases expire on their own", "runs", n,
		"lease_expires_by", last.Round(0).Format(time.RFC3339))
}
