//go:build qdtesthooks

package daemon

import (
	"os"
	"time"
)

// wallClock returns the scheduler's clock: time.Now, unless the test hook
// of testClockSkewEnv is set.
func wallClock() func() time.Time {
	path := os.Getenv(testClockSkewEnv)
	if path == "" {
		return time.Now
	}
	return (&skewedClock{path: path}).now
}
