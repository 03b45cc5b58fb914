//go:build unix && !linux && !darwin

package supervisor

import "syscall"

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

// hasExited is false here: the waiter alone learns of the exit.
func hasExited(int) bool { return false }
