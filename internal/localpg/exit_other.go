//go:build !linux

package localpg

import (
	"context"
	"time"
)

type exitWaiter struct{}

// openExit has no pidfd to offer on this platform: Await polls.
func openExit(int) (exitWaiter, bool) { return exitWaiter{}, false }

func (exitWaiter) wait(context.Context, time.Duration) {}

func (exitWaiter) close() {}
