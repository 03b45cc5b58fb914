//go:build !linux

package daemon

import (
	"context"
	"errors"
	"time"
)

type dirWatch struct{}

// watchStateDir has no way to watch on this platform: the daemon looks
// every stateDirCheck.
func watchStateDir(string, string) (*dirWatch, error) {
	return nil, errors.New("no inotify on this platform")
}

func (*dirWatch) wait(context.Context, time.Duration) {}

func (*dirWatch) close() {}
