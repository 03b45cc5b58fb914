//go:build !linux

package bench

import "syscall"

// daemonAttr puts a daemon under test in its own process group; without a
// parent-death signal here, a bench that dies leaves it to its drain.
func daemonAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
