package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// lockWait bounds how long a process waits for another to finish creating,
// starting or stopping the cluster.
const lockWait = 3 * time.Minute

// lock takes the cluster's flock, making its directory when missing. The
// file is opened close-on-exec, so the server started under the lock does
// not inherit it. It is mode 0644, so that root and the owner can both
// open it: flock needs no write access.
func (c *Cluster) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return nil, fmt.Errorf("make %s: %w", c.dir, err)
	}
	path := filepath.Join(c.dir, "lock")
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	ctx, cancel := context.WithTimeout(ctx, lockWait)
	defer cancel()
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for %s, which another qd holds while it creates, starts or stops the private cluster: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
