package bench

import "syscall"

// daemonAttr puts a daemon under test in its own process group and kills
// it if the bench dies first.
func daemonAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
