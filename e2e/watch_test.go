package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/pg"
)

// Ensure `qd status --watch` redraws the daemon's status in place until it
// is interrupted, then exits 0; and that `qd status` names the socket it
// tried when no daemon answers there.
func TestStatus_Watch(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	d := testkit.StartDaemon(t, qd, db, "watcher", "", testkit.DaemonOptions{})
	cmd := exec.Command(qd, "status", "--socket", d.Socket, "--watch", "--interval", "200ms")
	cmd.Env = testkit.Environ()
	var out strings.Builder
	cmd.Stdout = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(900 * time.Millisecond)
	_ = cmd.Process.Signal(syscall.SIGINT)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("qd status --watch after SIGINT: %v", err)
	}
	redraws := strings.Count(out.String(), "\x1b[H\x1b[2J")
	if redraws < 3 || strings.Count(out.String(), "supervisor:  watcher") != redraws {
		t.Fatalf("--watch drew %d screens in 0.9s at 200ms, each with the supervisor; want at least 3:\n%q", redraws, out.String())
	}

	d.Signal(syscall.SIGTERM)
	d.Wait(t, 10*time.Second)
	_, errOut, code := testkit.QD(t, qd, db, "status", "--socket", d.Socket)
	if code != 1 || !strings.Contains(errOut, "no qd daemon is answering at "+d.Socket) {
		t.Fatalf("qd status with the daemon gone: exit %d, %q; want 1 naming the socket", code, errOut)
	}
}

// Ensure `qd version` prints qd's version, Go's, the platform and the
// schema version it is built for.
func TestVersion(t *testing.T) {
	qd := testkit.MustBuild(t)
	out := testkit.MustQD(t, qd, "", "version")
	if !strings.HasPrefix(out, "qd ") || !strings.Contains(out, "go1.") || !strings.Contains(out, "linux/") ||
		!strings.Contains(out, fmt.Sprintf("schema %d)", pg.LatestVersion())) {
		t.Fatalf("qd version printed %q", out)
	}
}
