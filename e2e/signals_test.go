package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure signals sent while the daemon is still starting are handled, not
// fatal: SIGHUP never kills it once its own code runs (during the Go
// runtime's first milliseconds the default action applies), and an early
// SIGTERM makes it exit 0 with no run left claimed.
func TestDaemon_EarlySignals(t *testing.T) {
	t.Parallel()
	qd := testkit.MustBuild(t)
	db, _ := testkit.MustSchema(t)
	testkit.MustQD(t, qd, db, "migrate")
	dir := t.TempDir()
	agent := testkit.MustScript(t, dir, "agent.sh", "sleep 30\n")
	for i := range 3 {
		testkit.MustQD(t, qd, db, "enqueue", "--lane", fmt.Sprint("l", i), "--agent", "slow")
	}
	conf := filepath.Join(dir, "qd.hcl")
	body := fmt.Sprintf("socket = %q\nstate_dir = %q\nshutdown_grace = \"2s\"\nagent \"slow\" {\n  command = [%q]\n  schedule = \"@every 1s\"\n  parallel = 3\n}\n",
		filepath.Join(dir, "qd.sock"), filepath.Join(dir, "state"), agent)
	if err := os.WriteFile(conf, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		cmd := exec.Command(qd, "run", "--config", conf)
		cmd.Env = append(os.Environ(), "QD_DATABASE_URL="+db)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Past the Go runtime's own start (tens of ms with -race), during or
		// just after qd's start-up.
		time.Sleep(100*time.Millisecond + time.Duration(i)*10*time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(time.Duration(i) * 7 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("start %d: qd run ended with %v after an early SIGHUP and SIGTERM; want exit 0", i, err)
		}
	}
	out := testkit.MustQD(t, qd, db, "runs", "--state", "running", "--json")
	if out != "[]" {
		t.Fatalf("runs still marked running after the daemons exited:\n%s", out)
	}
}
