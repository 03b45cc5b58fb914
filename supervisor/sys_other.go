//go:build unix && !linux && !darwin

package supervisor

import (
	"os"
	"syscall"
)

// sysProcAttr puts the child in its own process group.
func sysProcAttr(pidfd *int) *syscall.SysProcAttr {
	*pidfd = -1
	return &syscall.SysProcAttr{Setpgid: true}
}

// procStart is unknown on this platform: KillOrphans checks only that the
// recorded pid still leads its recorded group.
func procStart(pid int) (uint64, bool) {
	if syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	return 0, true
}

func groupProcs(int) ([]proc, error) { return nil, nil }

func bootID() string { return "" }

func waitExited(int, int) bool { return false }

// childPipe makes a pipe with one end for a child and one for the daemon,
// the daemon's end for reading when parentReads.
func childPipe(parentReads, _ bool) (parent, child *os.File, err error) {
	r, w, err := os.Pipe()
	if parentReads {
		return r, w, err
	}
	return w, r, err
}
