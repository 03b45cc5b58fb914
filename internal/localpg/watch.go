package localpg

import (
	"os"
	"path/filepath"
	"strconv"
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
