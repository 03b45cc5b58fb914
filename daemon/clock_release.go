//go:build !qdtesthooks

package daemon

import "time"

// wallClock returns the scheduler's clock. A build without the tag
// qdtesthooks never reads testClockSkewEnv.
func wallClock() func() time.Time { return time.Now }
