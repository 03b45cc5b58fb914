package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
	qd, db := testkit.MustQueue(t)
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
	clean, early := 0, 0
	for i := 0; clean < 10; i++ {
		if early > 20 {
			t.Fatalf("qd run died of SIGHUP before its own code ran %d times in a row", early)
		}
		cmd := exec.Command(qd, "run", "--config", conf)
		cmd.Env = append(os.Environ(), "QD_DATABASE_URL="+db)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Past the Go runtime's own start (tens of ms with -race, more on a
		// loaded machine), during or just after qd's start-up.
		time.Sleep(time.Duration(100+early*50+clean*10) * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGHUP)
		time.Sleep(time.Duration(clean) * 7 * time.Millisecond)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		var ee *exec.ExitError
		switch {
		case err == nil:
			clean++
		case errors.As(err, &ee) && stderr.Len() == 0:
			// Killed before qd wrote anything: the signal came while the
			// runtime was still starting, before any of qd's code ran.
			early++
		default:
			t.Fatalf("start %d: qd run ended with %v after an early SIGHUP and SIGTERM; want exit 0\n%s", i, err, stderr.String())
		}
	}
	out := testkit.MustQD(t, qd, db, "runs", "--state", "running", "--json")
	if out != "[]" {
		t.Fatalf("runs still marked running after the daemons exited:\n%s", out)
	}
}
