package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a child that works three times longer than its lease is kept alive
// by the daemon's heartbeats: one run, completed, never reaped.
func TestDaemon_HeartbeatOutlivesShortLease(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	agent := testkit.MustScript(t, t.TempDir(), "slow.sh", "sleep 6\necho finished\n")
	id := enqueue(t, qd, db, "hb", "slow")
	testkit.StartDaemon(t, qd, db, "heartbeat", fmt.Sprintf(`
agent "slow" {
  command   = [%q]
  schedule  = "@every 1s"
  lease     = "2s"
  heartbeat = "600ms"
}`, agent), testkit.DaemonOptions{})
	s := waitShow(t, qd, db, id, 30*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	if len(s.Runs) != 1 || s.Runs[0].State != "completed" || s.Runs[0].Summary != "finished" {
		t.Fatalf("runs %+v: want exactly one, completed, summary \"finished\"", s.Runs)
	}
}

// Ensure a child that exits non-zero is retried after the agent's backoff and
// the task fails once its attempts are spent, each run recording the exit.
func TestDaemon_NonZeroExitRetriesThenFails(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	agent := testkit.MustScript(t, t.TempDir(), "boom.sh", "echo \"boom $QD_ATTEMPT\"\nexit 3\n")
	id := enqueue(t, qd, db, "rf", "boom", "--max-attempts", "2")
	testkit.StartDaemon(t, qd, db, "retry", fmt.Sprintf(`
agent "boom" {
  command       = [%q]
  schedule      = "@every 1s"
  retry_backoff = "1s"
}`, agent), testkit.DaemonOptions{})
	s := waitShow(t, qd, db, id, 30*time.Second, "failed", func(s shown) bool { return s.Task.State == "failed" })
	if got := strings.Join(runStates(s), ","); got != "failed,failed" {
		t.Fatalf("runs %s, want failed,failed", got)
	}
	for i, r := range s.Runs {
		if r.Attempt != i+1 || r.ExitCode == nil || *r.ExitCode != 3 {
			t.Errorf("run %d: attempt %d exit %v, want attempt %d exit 3", r.ID, r.Attempt, r.ExitCode, i+1)
		}
		if want := fmt.Sprintf("exited 3: boom %d", i+1); r.Summary != want {
			t.Errorf("run %d: summary %q, want %q", r.ID, r.Summary, want)
		}
	}
	if s.Task.Attempts != 2 {
		t.Errorf("task attempts %d, want 2", s.Task.Attempts)
	}
}

// Ensure a timeout kills the child's whole group, a grandchild that ignores
// SIGTERM included, and abandons the run with a summary naming the timeout.
func TestDaemon_TimeoutKillsGrandchild(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	gc := filepath.Join(dir, "grandchild.pid")
	agent := testkit.MustScript(t, dir, "hang.sh", fmt.Sprintf(`sh -c 'trap "" TERM; exec sleep 1000' &
echo $! > %s
echo working
sleep 1000
`, gc))
	id := enqueue(t, qd, db, "to", "hang", "--max-attempts", "1")
	testkit.StartDaemon(t, qd, db, "timeout", fmt.Sprintf(`
agent "hang" {
  command    = [%q]
  schedule   = "@every 1s"
  timeout    = "2s"
  kill_grace = "1s"
}`, agent), testkit.DaemonOptions{})
	pid := readPID(t, gc, 15*time.Second)
	if !testkit.Alive(pid) {
		t.Fatalf("grandchild %d is not running before the timeout", pid)
	}
	waitAbandoned(t, qd, db, id, "timed out after 2s", "grandchild", pid)
}

// Ensure a child that prints once and then goes quiet is abandoned after the
// agent's stall_timeout, with a summary that says so.
func TestDaemon_StallTimeoutAbandonsQuietChild(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	agent := testkit.MustScript(t, dir, "quiet.sh", fmt.Sprintf("echo $$ > %s\necho hello once\nexec sleep 1000\n", pidFile))
	id := enqueue(t, qd, db, "st", "quiet", "--max-attempts", "1")
	testkit.StartDaemon(t, qd, db, "stall", fmt.Sprintf(`
agent "quiet" {
  command       = [%q]
  schedule      = "@every 1s"
  stall_timeout = "2s"
  kill_grace    = "1s"
}`, agent), testkit.DaemonOptions{})
	pid := readPID(t, pidFile, 15*time.Second)
	waitAbandoned(t, qd, db, id, "stalled: no output for 2s", "child", pid)
}

// waitAbandoned waits for task id to fail, wants one run of it, abandoned
// with a summary that contains summary, and then the process pid (named
// by what) gone.
func waitAbandoned(t *testing.T, qd, db, id, summary, what string, pid int) {
	t.Helper()
	s := waitShow(t, qd, db, id, 20*time.Second, "failed", func(s shown) bool { return s.Task.State == "failed" })
	if len(s.Runs) != 1 || s.Runs[0].State != "abandoned" || !strings.Contains(s.Runs[0].Summary, summary) {
		t.Fatalf("runs %+v: want one abandoned run whose summary says %q", s.Runs, summary)
	}
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("%s %d to be gone", what, pid), func() bool { return !testkit.Alive(pid) })
}

// Ensure a child that writes nothing but proves progress with
// `qd heartbeat $QD_RUN_ID` (through the daemon's socket: it has no database
// URL) is not taken for stalled, and completes.
func TestDaemon_ChildProvesProgressThroughSocket(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	agent := testkit.MustScript(t, t.TempDir(), "silent.sh", fmt.Sprintf(`i=0
while [ $i -lt 8 ]; do
  sleep 0.5
  %s heartbeat "$QD_RUN_ID" >/dev/null 2>&1 || exit 9
  i=$((i + 1))
done
echo made it
`, qd))
	id := enqueue(t, qd, db, "pr", "silent", "--max-attempts", "1")
	d := testkit.StartDaemon(t, qd, db, "progress", fmt.Sprintf(`
agent "silent" {
  command       = [%q]
  schedule      = "@every 1s"
  stall_timeout = "2s"
  kill_grace    = "1s"
  env = {
    GORACE = "atexit_sleep_ms=0"
  }
}`, agent), testkit.DaemonOptions{})
	s := waitShow(t, qd, db, id, 30*time.Second, "finished", func(s shown) bool {
		return s.Task.State == "done" || s.Task.State == "failed"
	})
	if len(s.Runs) != 1 || s.Runs[0].State != "completed" || s.Runs[0].Summary != "made it" {
		t.Fatalf("runs %+v: want one completed run: four silent seconds with progress every 0.5s beat a 2s stall_timeout", s.Runs)
	}
	// A run the daemon does not hold: exit 4, as for a lost lease.
	cmd := exec.Command(qd, "heartbeat", fmt.Sprint(s.Runs[0].ID))
	cmd.Env = []string{"QD_SOCKET=" + d.Socket, "PATH=" + os.Getenv("PATH"), "GORACE=atexit_sleep_ms=0"}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 4 || !strings.Contains(string(out), "not running it") {
		t.Errorf("qd heartbeat of a finished run through the socket: %v, %q; want exit 4 saying the daemon is not running it", err, out)
	}
}
