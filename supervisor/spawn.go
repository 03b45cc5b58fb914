package supervisor

import (
	"os/exec"
	"runtime"
	"sync"
)

// spawnReq asks the spawner thread to start cmd.
type spawnReq struct {
	cmd   *exec.Cmd
	reply chan error
}

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// spawn starts cmd from the one spawner thread of this process. That
// goroutine is locked to its OS thread and never returns, so the thread that
// created every child lives as long as the process: the parent-death signal
// fires only when the daemon itself dies.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		go spawner(spawnCh)
	})
	reply := make(chan error, 1)
	spawnCh <- spawnReq{cmd: cmd, reply: reply}
	return <-reply
}

func spawner(reqs <-chan spawnReq) {
	runtime.LockOSThread() // never unlocked: see spawn
	for r := range reqs {
		r.reply <- r.cmd.Start()
	}
}
