package localpg

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// pidFile is what a server writes to its data directory's postmaster.pid,
// line by line (PostgreSQL 10 and later).
type pidFile struct {
	pid       int
	started   time.Time
	port      int
	socketDir string
	status    string // "starting", "stopping", "ready" or "standby"
}

// readPIDFile reads the postmaster.pid in dataDir; the error is
// fs.ErrNotExist when there is none.
func readPIDFile(dataDir string) (pidFile, error) {
	b, err := os.ReadFile(dataDir + "/postmaster.pid")
	if err != nil {
		return pidFile{}, err
	}
	lines := strings.Split(string(b), "\n")
	line := func(i int) string {
		if i < len(lines) {
			return strings.TrimSpace(lines[i])
		}
		return ""
	}
	var pf pidFile
	if pf.pid, err = strconv.Atoi(line(0)); err != nil || pf.pid <= 0 {
		return pidFile{}, errors.New("postmaster.pid: no pid on its first line")
	}
	if sec, err := strconv.ParseInt(line(2), 10, 64); err == nil {
		pf.started = time.Unix(sec, 0)
	}
	pf.port, _ = strconv.Atoi(line(3))
	pf.socketDir = line(4)
	pf.status = line(7)
	return pf, nil
}

// exists reports whether there is a process pid, a zombie included.
func exists(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// alive reports whether a process pid exists and has not exited.
func alive(pid int) bool { return exists(pid) && !zombie(pid) }

// stale reports whether pf describes no server of this data directory: its
// process has exited, the file is older than the last boot (the pid is
// someone else's now), or the process is another program.
func (pf pidFile) stale(dataDir string) bool {
	if !alive(pf.pid) {
		return true
	}
	if boot := bootTime(); !boot.IsZero() && !pf.started.IsZero() && pf.started.Before(boot) {
		return true
	}
	return !postmasterOf(pf.pid, dataDir)
}
