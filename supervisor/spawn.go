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

// spawners is how many spawner threads start children: several, so that
// the children of one claim start side by side rather than one after the
// other (a fork and exec take a few hundred microseconds).
const spawners = 4

var (
	spawnOnce sync.Once
	spawnCh   chan spawnReq
)

// spawn starts cmd from one of the spawner threads of this process. Each is
// a goroutine locked to its OS thread that never returns, so the thread
// that created a child lives as long as the process: the parent-death
// signal fires only when the daemon itself dies.
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnCh = make(chan spawnReq)
		for range spawners {
			go spawner(spawnCh)
		}
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
