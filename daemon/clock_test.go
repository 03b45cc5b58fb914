package daemon

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Ensure the test-only clock moves the scheduler's wall clock by the
// duration its file holds and follows changes of the file.
func TestSkewedClock_File(t *testing.T) {
	path := filepath.Join(t.TempDir(), "skew")
	if err := os.WriteFile(path, []byte("2h\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := (&skewedClock{path: path}).now
	if d := now().Sub(time.Now()); d < 2*time.Hour-time.Second || d > 2*time.Hour+time.Second {
		t.Fatalf("with a skew of 2h the clock is %s ahead", d)
	}
	if err := os.WriteFile(path, []byte("-30m"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * skewRefresh)
	if d := now().Sub(time.Now()); d > -30*time.Minute+time.Second || d < -30*time.Minute-time.Second {
		t.Fatalf("after the file said -30m the clock is %s off", d)
	}
}
