package daemon

import (
	"context"
	"fmt"
	"time"
)

// stateDirCheck is how often the daemon checks that its state directory
// is still there.
const stateDirCheck = time.Second

// keepStateDir remakes the state directory when it was deleted (or its
// lock replaced) under the running daemon: the lock, the record of this
// incarnation and the child records live there, and without them a
// restart after a crash could neither prove this daemon gone nor kill the
// children it left, and would leave their runs to their leases while the
// children ran on. Children keep running throughout; qd status shows the
// loss until the daemon stops.
func (d *daemon) keepStateDir(ctx context.Context) {
	t := time.NewTicker(stateDirCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if d.inc.intact() {
			continue
		}
		dir := d.config().StateDir
		at := time.Now()
		err := d.inc.remake()
		n := 0
		if err == nil {
			n, err = d.sup.RemakeStateDir()
		}
		if err != nil {
			d.logger.Error("state directory was deleted under the running daemon and could not be remade: a restart after a crash cannot kill this daemon's children; stop the daemon with SIGTERM to end them", "state_dir", dir, "error", err)
			d.setStateLost(fmt.Sprintf("deleted at %s; remaking it failed: %v", at.Format(time.RFC3339), err))
			continue
		}
		d.logger.Error("state directory was remade: it was deleted under the running daemon; the lock, the incarnation record and the records of the live children are written again, the log files of the runs then live are gone (their output tails are stored on the runs)",
			"state_dir", dir, "children", n)
		d.setStateLost(fmt.Sprintf("deleted at %s and remade: the log files of %d runs then live are gone", at.Format(time.RFC3339), n))
	}
}

func (d *daemon) setStateLost(s string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stateLost = s
}
