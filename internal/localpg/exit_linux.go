package localpg

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// exitWaiter waits for pid to exit through a pidfd, which the runtime's
// poller watches like a socket: no thread wakes until the process ends.
type exitWaiter struct{ f *os.File }

// openExit opens a pidfd of pid; false where the kernel has none (before
// Linux 5.3) or pid is gone.
func openExit(pid int) (exitWaiter, bool) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return exitWaiter{}, false
	}
	return exitWaiter{os.NewFile(uintptr(fd), "pidfd")}, true
}

func (w exitWaiter) close() { w.f.Close() }

// wait returns when the process has exited, ctx ends or d has passed.
func (w exitWaiter) wait(ctx context.Context, d time.Duration) {
	defer w.f.Close()
	rc, err := w.f.SyscallConn()
	if err != nil || w.f.SetReadDeadline(time.Now().Add(d)) != nil {
		sleepCtx(ctx, min(d, pollEvery))
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Now()) })
	defer stop()
	waited := false
	// A pidfd turns readable when its process exits: the first call asks
	// the poller to wait, the second comes after it.
	_ = rc.Read(func(uintptr) bool {
		done := waited
		waited = true
		return done
	})
}
