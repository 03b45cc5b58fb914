//go:build !qdtesthooks

package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Ensure a build without the tag qdtesthooks ignores the test-only clock
// hook: its scheduler reads the real clock whatever the variable names.
func TestWallClock_NoHookWithoutTag(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skew")
	if err := os.WriteFile(path, []byte("2h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(testClockSkewEnv, path)
	if d := time.Since(wallClock()()); d < -time.Second || d > time.Second {
		t.Fatalf("a release build's clock is %s off with the hook's variable set", d)
	}
}
