package notify

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// procAttr puts a command in a process group of its own and has the
// kernel kill it if the daemon dies: a try cut short by a crash is tried
// again, so a command that lived on would tell twice.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// spawn starts cmd from a goroutine locked to its thread for good: the
// parent-death signal fires when the thread that forked exits, so it must
// live as long as the daemon.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go func() {
			runtime.LockOSThread() // never unlocked
			for r := range spawnCh {
				r.reply <- r.cmd.Start()
			}
		}()
	})
	reply := make(chan error, 1)
	spawnCh <- spawnReq{cmd, reply}
	return <-reply
}
