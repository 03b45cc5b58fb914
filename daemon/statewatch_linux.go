package daemon

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// dirWatch wakes when the state directory or its lock file may have been
// removed, moved or replaced: an inotify descriptor, which the runtime's
// poller watches, so that nothing wakes while they stay put.
type dirWatch struct{ f *os.File }

// watchStateDir watches dir and lock; an error where inotify cannot.
func watchStateDir(dir, lock string) (*dirWatch, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	const self = unix.IN_DELETE_SELF | unix.IN_MOVE_SELF
	if _, err := unix.InotifyAddWatch(fd, dir, self|unix.IN_DELETE|unix.IN_MOVED_FROM|unix.IN_MOVED_TO|unix.IN_CREATE); err != nil {
		unix.Close(fd)
		return nil, err
	}
	// Unlinking a file the daemon holds open changes its link count.
	if _, err := unix.InotifyAddWatch(fd, lock, self|unix.IN_ATTRIB); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return &dirWatch{os.NewFile(uintptr(fd), "inotify")}, nil
}

// wait returns after an event, when ctx ends or when d has passed.
func (w *dirWatch) wait(ctx context.Context, d time.Duration) {
	if err := w.f.SetReadDeadline(time.Now().Add(d)); err != nil {
		sleepCtx(ctx, min(d, stateDirCheck))
		return
	}
	stop := context.AfterFunc(ctx, func() { _ = w.f.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	_, _ = w.f.Read(buf)
}

func (w *dirWatch) close() { w.f.Close() }
