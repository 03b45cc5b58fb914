package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// stateDirCheck is how often the daemon checks that its state directory
// is still there where it cannot watch it (no inotify, or the directory
// gone).
const stateDirCheck = time.Second

// stateDirAwaitMax is the longest the daemon waits on its watch of the
// state directory before it checks anyway: what the watch cannot see (a
// directory above it moved) is seen within it.
const stateDirAwaitMax = 30 * time.Second

// keepStateDir remakes the state directory when it was deleted (or its
// lock replaced) under the running daemon: the lock, the record of this
// incarnation and the child records live there, and without them a
// restart after a crash could neither prove this daemon gone nor kill the
// children it left, and would leave their runs to their leases while the
// children ran on. Children keep running throughout; qd status shows the
// loss until the daemon stops.
func (d *daemon) keepStateDir(ctx context.Context) {
	var w *dirWatch
	defer func() {
		if w != nil {
			w.close()
		}
	}()
	for {
		if w == nil {
			w, _ = watchStateDir(d.inc.dir, filepath.Join(d.inc.dir, lockName))
		}
		if w != nil {
			w.wait(ctx, stateDirAwaitMax)
		} else {
			_ = sleepCtx(ctx, stateDirCheck)
		}
		if ctx.Err() != nil {
			return
		}
		if d.inc.intact() {
			continue
		}
		if w != nil { // the directory and lock watched are gone
			w.close()
			w = nil
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
