package localpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Status describes the cluster as it is, starting nothing.
type Status struct {
	Dir         string    // the cluster's directory
	DataDir     string    // the data directory in it
	LogPath     string    // the server's log
	Created     bool      // initdb has run
	Running     bool      // the server answers on its socket
	PID         int       // the postmaster's, when running
	Since       time.Time // when it started, when running
	SocketDir   string    // where the socket is, or will be
	URL         string    // database qd there, for psql; set once created
	Owner       string    // the user it runs as and the role qd connects as
	DataVersion string    // the major version that made it
	Size        int64     // bytes in the data directory
	BinDir      string    // the binaries that would start it, when found
	Version     string    // their version
	BinError    string    // why none were found
}

// Status returns the cluster's state.
func (c *Cluster) Status() Status {
	s := Status{Dir: c.dir, DataDir: c.dataDir(), LogPath: c.logPath(), SocketDir: c.socketDir()}
	if _, err := os.Stat(c.dataDir()); err == nil {
		s.Created = true
		s.DataVersion = c.dataVersion()
		s.Size = dirSize(c.dataDir())
		if o, err := existingOwner(c.dataDir()); err == nil {
			s.Owner = o.name
		}
	}
	if url, ok := c.answering(); ok {
		s.Running, s.URL = true, url
		if pf, err := readPIDFile(c.dataDir()); err == nil {
			s.PID, s.Since, s.SocketDir = pf.pid, pf.started, pf.socketDir
		}
	} else if s.Owner != "" {
		s.URL = urlFor(s.SocketDir, port, s.Owner)
	}
	if bin, err := c.search.find(s.DataVersion); err != nil {
		s.BinError = err.Error()
	} else {
		s.BinDir = bin.dir
		s.Version, _ = bin.version()
	}
	return s
}

// dirSize adds up the sizes of the files under dir.
func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// StopMode is how Stop shuts the server down.
type StopMode string

const (
	// Fast ends the sessions and shuts down cleanly.
	Fast StopMode = "fast"
	// Immediate stops at once, without a shutdown checkpoint: the next
	// start recovers from the WAL. Tests use it to be quick.
	Immediate StopMode = "immediate"
)

// Stop shuts the server down with pg_ctl when it runs, and reports
// whether it did.
func (c *Cluster) Stop(ctx context.Context, mode StopMode) (bool, error) {
	if _, err := os.Stat(c.dataDir()); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return false, err
	}
	defer unlock()
	pf, err := readPIDFile(c.dataDir())
	if errors.Is(err, fs.ErrNotExist) || (err == nil && pf.stale(c.dataDir())) {
		return false, nil
	}
	o, err := existingOwner(c.dataDir())
	if err != nil {
		return false, err
	}
	bin, err := c.search.find(c.dataVersion())
	if err != nil {
		return false, err
	}
	out, err := o.command(c.dir, bin.path("pg_ctl"), "stop", "--wait", "--timeout", "300", "--silent",
		"--mode", string(mode), "--pgdata", c.dataDir()).CombinedOutput()
	if err != nil {
		return false, fmt.Errorf("stop the private PostgreSQL in %s: pg_ctl: %v: %s", c.dir, err, lastLines(out, 3))
	}
	return true, nil
}
