package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure the payload reaches the agent byte-exact on stdin with the task's
// environment, and that exit 0 completes the task.
func TestDaemon_PayloadByteExact(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	agent := testkit.MustScript(t, dir, "agent.sh", fmt.Sprintf(`cat > %s/payload.$QD_TASK_ID
env | grep '^QD_' | sort > %s/env.$QD_TASK_ID
echo "got it"
`, dir, dir))
	payload := "{ \"b\" : [1, 2 ,3],\n  \"a\": \"\u00e9\\u00e9\"  }"
	id := testkit.MustQD(t, qd, db, "enqueue", "--lane", "p", "--agent", "echo", payload)
	d := testkit.StartDaemon(t, qd, db, "payload", fmt.Sprintf(`
agent "echo" {
  command  = [%q]
  schedule = "@every 1s"
}`, agent), testkit.DaemonOptions{})
	waitTaskState(t, qd, db, id, "done", 15*time.Second)
	if got := readFile(t, filepath.Join(dir, "payload."+id)); got != payload {
		t.Fatalf("payload: got %q, want %q", got, payload)
	}
	env := readFile(t, filepath.Join(dir, "env."+id))
	for _, want := range []string{"QD_AGENT=echo", "QD_ATTEMPT=1", "QD_LANE=p", "QD_TASK_ID=" + id} {
		if !contains(env, want) {
			t.Errorf("agent env lacks %s:\n%s", want, env)
		}
	}
	d.Signal(syscall.SIGTERM)
	if code := d.Wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit code after SIGTERM: %d", code)
	}
}

func waitTaskState(t *testing.T, qd, db, id, want string, timeout time.Duration) map[string]any {
	t.Helper()
	var task map[string]any
	testkit.Eventually(t, timeout, "task "+id+" to be "+want, func() bool {
		out := testkit.MustQD(t, qd, db, "show", id, "--json")
		task = map[string]any{}
		if err := json.Unmarshal([]byte(out), &task); err != nil {
			t.Fatalf("qd show %s --json: %v\n%s", id, err, out)
		}
		return taskField(task, "state") == want
	})
	return task
}

// Ensure an agent's environment holds only the allowlisted variables, its
// config env and the QD_ ones: the database URL, PG* variables and systemd's
// NOTIFY_SOCKET given to the daemon never reach it, QD_SOCKET does.
func TestDaemon_ChildEnvironmentIsAllowlisted(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	envFile := filepath.Join(dir, "env")
	agent := testkit.MustScript(t, dir, "env.sh", fmt.Sprintf("env > %s\n", envFile))
	id := testkit.MustQD(t, qd, db, "enqueue", "--lane", "env", "--agent", "env", "{}")
	d := testkit.StartDaemon(t, qd, db, "env", fmt.Sprintf(`
agent "env" {
  command  = [%q]
  schedule = "@every 1s"
  env = {
    MY_SETTING = "on"
  }
}`, agent), testkit.DaemonOptions{Env: []string{"PGPASSWORD=hunter2", "PGHOST=127.0.0.1", "NOTIFY_SOCKET=/nonexistent/notify", "SECRET_TOKEN=t0k3n"}})
	waitTaskState(t, qd, db, id, "done", 15*time.Second)
	env := readFile(t, envFile)
	for _, bad := range []string{"QD_DATABASE_URL=", "PGPASSWORD=", "PGHOST=", "NOTIFY_SOCKET=", "SECRET_TOKEN=", "hunter2"} {
		if contains(env, bad) {
			t.Errorf("agent environment leaks %s", bad)
		}
	}
	for _, want := range []string{"MY_SETTING=on", "QD_SOCKET=" + d.Socket, "QD_RUN_ID=", "PATH="} {
		if !contains(env, want) {
			t.Errorf("agent environment lacks %s:\n%s", want, env)
		}
	}
}
