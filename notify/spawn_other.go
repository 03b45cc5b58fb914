//go:build !linux

package notify

import (
	"os/exec"
	"syscall"
)

// procAttr puts a command in a process group of its own. Without a
// parent-death signal, a command outlives a daemon that crashed.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

func spawn(cmd *exec.Cmd) error { return cmd.Start() }
