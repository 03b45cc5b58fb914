//go:build !linux

package supervisor

import "testing"

// zombies is checked on Linux only.
func zombies(t *testing.T) []int {
	t.Skip("zombie check reads /proc")
	return nil
}
