package localpg

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// Running returns the URL of database qd when the server answers on its
// socket and its schema is set up, as Start would, but starts nothing:
// for the commands that only read the queue.
func (c *Cluster) Running() (string, bool) {
	url, ok := c.answering()
	if !ok || !c.setupDone() {
		return "", false
	}
	return url, true
}

// Died reports whether the server went away without being stopped: its
// postmaster.pid is still there but names no live postmaster of this data
// directory (kill -9, the OOM killer, a crash), or the postmaster lives
// but its socket file is gone (a cleaner of /tmp). A server stopped by
// Stop, pg_ctl or a signal it handles removes its postmaster.pid and has
// not died; neither has one that was never started, or one starting or
// stopping. It connects to nothing and takes no lock, so that a daemon
// may ask several times a second.
func (c *Cluster) Died() bool {
	pf, err := readPIDFile(c.dataDir())
	if err != nil {
		// None: stopped. One cut short: a server writing it, or one
		// that crashed while it did, which the next Start clears.
		return false
	}
	if pf.stale(c.dataDir()) {
		return true
	}
	if pf.status != "ready" || pf.socketDir == "" {
		return false
	}
	_, err = os.Stat(filepath.Join(pf.socketDir, ".s.PGSQL."+strconv.Itoa(pf.port)))
	return err != nil
}

// pollEvery is how often Await looks at a server it cannot wait on: one
// starting or stopping, or where the platform offers no way to wait for a
// process's exit.
const pollEvery = 250 * time.Millisecond

// Await returns when the server may have died, ctx ends or d has passed,
// whichever comes first; then Died tells. On Linux it waits on the exit
// of the postmaster of a ready server (a pidfd) and wakes nothing while it
// runs, so that a daemon watching an idle server costs nothing; a socket
// file removed under a live server is seen only when d has passed. With no
// server it sleeps d; with one starting or stopping, or no pidfd, it
// returns within pollEvery.
func (c *Cluster) Await(ctx context.Context, d time.Duration) {
	pf, err := readPIDFile(c.dataDir())
	switch {
	case errors.Is(err, fs.ErrNotExist):
		sleepCtx(ctx, d)
		return
	case err != nil || pf.status != "ready":
		sleepCtx(ctx, min(d, pollEvery))
		return
	}
	w, ok := openExit(pf.pid)
	if !ok {
		sleepCtx(ctx, min(d, pollEvery))
		return
	}
	// The pidfd names the process that had the pid when it was opened:
	// if that is no longer this cluster's postmaster, it died already.
	if pf.stale(c.dataDir()) {
		w.close()
		return
	}
	w.wait(ctx, d)
}

// sleepCtx sleeps d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
