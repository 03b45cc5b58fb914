package daemon

import (
	"time"
)

// serverWatcher is a queue that tells when the database server behind it
// changed (pg: a new connection found another server or database).
type serverWatcher interface {
	ServerChangedAt() time.Time
}

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

// holding reports whether claims wait after a change of server.
func (d *daemon) holding() bool {
	w, ok := d.queue.(serverWatcher)
	if !ok {
		return false
	}
	at := w.ServerChangedAt()
	return !at.IsZero() && time.Since(at) < d.claimHold()
}
