package localpg

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// await deals with a server that does not answer, before a start: it waits
// while one of this data directory's is starting or stopping, shuts down
// one that runs but has lost its socket (to a /tmp cleaner), and removes a
// postmaster.pid that would stop the next server from starting. It
// returns the URL when the server answers meanwhile.
//
// A postmaster.pid whose process is simply gone is left to the server,
// which checks that no child of the old one still holds its shared memory.
// One that names a zombie, a pid that now belongs to another program or a
// pid from before the last boot, or one with no pid at all, would make the
// server refuse to start: it is removed once no process works in the data
// directory any more.
func (c *Cluster) await(ctx context.Context) (string, bool, error) {
	deadline := time.Now().Add(lockWait)
	var lost time.Time // when a ready server was first seen not answering
	stopping := false
	for {
		if url, ok := c.answering(); ok {
			return url, true, nil
		}
		pf, err := readPIDFile(c.dataDir())
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return "", false, nil
		case err != nil: // empty or cut short by a crash at start-up
			if !dirInUse(c.dataDir()) {
				return "", false, removeStale(c.dataDir(), pf)
			}
		case !exists(pf.pid):
			return "", false, nil
		case pf.stale(c.dataDir()):
			if !dirInUse(c.dataDir()) {
				return "", false, removeStale(c.dataDir(), pf)
			}
		case pf.status != "ready" || stopping:
		case lost.IsZero():
			lost = time.Now()
		case time.Since(lost) > 3*time.Second:
			_ = syscall.Kill(pf.pid, syscall.SIGINT) // a fast shutdown, then a start
			stopping = true
		}
		if time.Now().After(deadline) {
			return "", false, fmt.Errorf("the private PostgreSQL in %s (pid %d) is %q and does not answer; see %s", c.dir, pf.pid, pf.status, c.logPath())
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// removeStale removes the postmaster.pid of a server that is gone, and the
// lock file beside its socket when it names the same pid.
func removeStale(dataDir string, pf pidFile) error {
	if pf.socketDir != "" {
		lock := filepath.Join(pf.socketDir, ".s.PGSQL."+strconv.Itoa(pf.port)+".lock")
		if b, err := os.ReadFile(lock); err == nil {
			if first, _, _ := strings.Cut(string(b), "\n"); strings.TrimSpace(first) == strconv.Itoa(pf.pid) {
				_ = os.Remove(lock)
			}
		}
	}
	err := os.Remove(filepath.Join(dataDir, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// launch starts the server with pg_ctl and waits until it accepts
// connections. Right after a crash, children of the old server may hold
// its shared memory for a moment, and the server refuses to start until
// they are gone: such a refusal is tried again for a while.
func (c *Cluster) launch(bin binaries, o owner) error {
	if !o.self() {
		if err := reachable(o, c.dir); err != nil {
			return err
		}
	}
	sock := c.socketDir()
	if sock != c.dir {
		if err := ensureSocketDir(sock, o); err != nil {
			return err
		}
	}
	if err := writeConf(c.dataDir(), sock, o); err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		from := fileSize(c.logPath())
		out, err := o.command(c.dir, bin.path("pg_ctl"), "start", "--wait", "--timeout", "300", "--silent",
			"--pgdata", c.dataDir(), "--log", c.logPath()).CombinedOutput()
		if err == nil {
			return nil
		}
		log := readFrom(c.logPath(), from)
		if strings.Contains(log, "is still in use") && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			continue
		}
		return fmt.Errorf("start the private PostgreSQL in %s: pg_ctl: %v: %s %s", c.dir, err,
			lastLines(out, 3), lastLines([]byte(log), 5))
	}
}

func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readFrom returns what path holds past offset, at most 64 KiB of it.
func readFrom(path string, offset int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ""
	}
	b, _ := io.ReadAll(io.LimitReader(f, 64<<10))
	return string(b)
}
