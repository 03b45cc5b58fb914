package daemon

import (
	"os"
	"strings"
	"sync"
	"time"
)

// testClockSkewEnv names a test-only hook: the path of a file holding a
// duration ("2h", "-30m", "0s") that is added to the wall clock the
// daemon's scheduler reads, re-read whenever it may have changed, so that
// a test can make one daemon's wall clock jump while it runs without
// touching the machine's. It exists because libfaketime cannot do it from
// outside: Go reads the clock through the vDSO, not through libc. Nothing
// about leases reads the wall clock: they are decided by the database's
// clock, and the daemon's local deadlines by the monotonic clock.
//
// Only a binary built with the build tag qdtesthooks reads it (the tests
// build qd so, internal/testkit); any other build ignores the variable
// (wallClock, in clock_hooks.go and clock_release.go).
const testClockSkewEnv = "QD_TEST_CLOCK_SKEW_FILE"

// skewedClock is the scheduler's clock under the hook.
type skewedClock struct {
	path string

	mu     sync.Mutex
	read   time.Time // when the file was last read (monotonic)
	offset time.Duration
}

// skewRefresh bounds how long a change of the file takes to be seen.
const skewRefresh = 50 * time.Millisecond

func (c *skewedClock) now() time.Time {
	t := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.read.IsZero() || t.Sub(c.read) >= skewRefresh {
		c.read = t
		if b, err := os.ReadFile(c.path); err == nil {
			if d, err := time.ParseDuration(strings.TrimSpace(string(b))); err == nil {
				c.offset = d
			}
		}
	}
	// Round(0) drops the monotonic reading, so that the result compares
	// by its wall clock alone, as the schedule's ticks do.
	return t.Round(0).Add(c.offset)
}
