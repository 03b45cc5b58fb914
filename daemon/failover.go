package daemon

import (
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// claimHold is how long after the database server changed the daemon
// claims nothing, and gives back unstarted what a claim in flight brought:
// a server that took over may have lost the latest runs (an asynchronous
// replica promoted, a copy restored a few seconds behind), so it counts
// their lanes short and hands their ids out again, while their children
// still run until their daemons' next heartbeat finds the lease gone and
// kills them. Two heartbeats of the slowest agent and a second cover a
// failed first heartbeat on a dead connection and the kill; every daemon
// sharing the queue is assumed to beat as often.
func (d *daemon) claimHold() time.Duration {
	hb := time.Duration(0)
	for _, a := range d.config().Agents {
		hb = max(hb, a.Heartbeat)
	}
	return 2*hb + time.Second
}

// holding reports whether claims wait after a change of server, and logs
// when a hold begins and ends.
func (d *daemon) holding() bool {
	if d.backend.Server == nil {
		return false
	}
	at, why := d.backend.Server.ServerChange()
	until := at.Add(d.claimHold())
	held := !at.IsZero() && time.Now().Before(until)
	d.hold.note(at, until, held, why, d.logger)
	return held
}

// claimHoldLog logs each hold of claims once as it begins and once as it
// ends.
type claimHoldLog struct {
	mu     sync.Mutex
	logged time.Time // the change whose hold was logged as begun
	ended  bool
}

func (h *claimHoldLog) note(at, until time.Time, held bool, why string, logger hclog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case at.IsZero():
	case held && !at.Equal(h.logged):
		h.logged, h.ended = at, false
		logger.Warn("claims held: the database server changed, and runs it lost may still be running until their heartbeats find out",
			"why", why, "until", until.Format(time.RFC3339))
	case !held && at.Equal(h.logged) && !h.ended:
		h.ended = true
		logger.Info("claims resume: the hold after the database server changed is over", "held_for", until.Sub(at).Round(time.Second))
	}
}
