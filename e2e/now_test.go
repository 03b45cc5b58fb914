package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// startMarker writes an agent that records when it started (Unix ns) in
// dir/TASK.start, then sleeps for secs, stopping on SIGTERM.
func startMarker(t *testing.T, dir, secs string) string {
	return testkit.MustScript(t, dir, "marker.sh", `
date +%s%N > "`+dir+`/$QD_TASK_ID.start.tmp" && mv "`+dir+`/$QD_TASK_ID.start.tmp" "`+dir+`/$QD_TASK_ID.start"
echo $$ > "`+dir+`/$QD_TASK_ID.pid"
exec sleep `+secs+`
`)
}

// startedAt waits for task id's agent to record its start.
func startedAt(t *testing.T, dir, id string, timeout time.Duration) time.Time {
	t.Helper()
	var at time.Time
	testkit.Eventually(t, timeout, "task "+id+" to start", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, id+".start"))
		if err != nil {
			return false
		}
		ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		at = time.Unix(0, ns)
		return err == nil
	})
	return at
}

func nowAgent(name, script, schedule string) string {
	return fmt.Sprintf("agent %q {\n  command = [%q]\n  schedule = %q\n  lease = \"1m\"\n  heartbeat = \"20s\"\n  kill_grace = \"2s\"\n}\n", name, script, schedule)
}

// Ensure `qd enqueue` and `qd run-now` on the daemon's host wake it, so a
// task for an agent whose next tick is an hour away starts at once; print
// the enqueue-to-start latency. run-now of an agent the daemon does not
// run exits 2 and names those it does; a bad payload writes nothing.
func TestNow_EnqueueAndRunNowWake(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	d := testkit.StartDaemon(t, qd, db, "now", nowAgent("hourly", startMarker(t, dir, "0.2"), "@hourly"), testkit.DaemonOptions{})

	for _, how := range []string{"enqueue", "run-now"} {
		var args []string
		if how == "enqueue" {
			args = []string{"enqueue", "--config", d.Config, "--lane", "now", "--agent", "hourly", "{}"}
		} else {
			args = []string{"run-now", "--config", d.Config, "hourly", `{"why":"now"}`}
		}
		begin := time.Now()
		out, errOut, code := testkit.QD(t, qd, db, args...)
		if code != 0 || errOut != "" {
			t.Fatalf("qd %s: exit %d, stderr %q", how, code, errOut)
		}
		id := strings.TrimSpace(out)
		took := startedAt(t, dir, id, 10*time.Second).Sub(begin)
		if took > 5*time.Second {
			t.Errorf("qd %s: the child started %s later; the daemon was not woken", how, took)
		}
		t.Logf("qd %s to child start, same host: %s (target 100ms)", how, took.Round(time.Millisecond))
		waitShow(t, qd, db, id, 10*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	}

	_, errOut, code := testkit.QD(t, qd, db, "run-now", "--config", d.Config, "ghost")
	if code != 2 || !strings.Contains(errOut, `runs no agent "ghost"; it runs: hourly`) {
		t.Errorf("run-now of an unknown agent: exit %d, stderr %q; want 2 naming hourly", code, errOut)
	}
	before := testkit.MustQD(t, qd, db, "tasks", "--json")
	if _, _, code := testkit.QD(t, qd, db, "run-now", "--config", d.Config, "hourly", "{not json"); code != 2 {
		t.Errorf("run-now with a bad payload exited %d, want 2", code)
	}
	if after := testkit.MustQD(t, qd, db, "tasks", "--json"); after != before {
		t.Error("run-now with a bad payload wrote a task")
	}
}

// Ensure `qd cancel` of a running task stops its child at once through the
// socket on the daemon's host, and within about a second when it is made
// from elsewhere (no socket: the daemon's poll sees it), long before the
// run's next heartbeat; print both latencies.
func TestNow_CancelAtOnce(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	d := testkit.StartDaemon(t, qd, db, "cancel-now", nowAgent("long", startMarker(t, dir, "300"), "@every 1s")+`
lane "c1" {
  max_running = 2
}`, testkit.DaemonOptions{})
	for _, tt := range []struct {
		where, want string
		args        []string
		target      time.Duration
	}{
		{"same host", "stopped now by the daemon on this host", []string{"--config", d.Config}, 500 * time.Millisecond},
		{"other host", "is running elsewhere; cancel requested", nil, 2 * time.Second},
	} {
		id := enqueue(t, qd, db, "c1", "long")
		startedAt(t, dir, id, 20*time.Second)
		pid := readPID(t, filepath.Join(dir, id+".pid"), 5*time.Second)
		begin := time.Now()
		out := testkit.MustQD(t, qd, db, append([]string{"cancel"}, append(tt.args, id)...)...)
		if !strings.Contains(out, tt.want) {
			t.Errorf("%s: qd cancel said %q, want %q", tt.where, out, tt.want)
		}
		testkit.Eventually(t, 10*time.Second, "the cancelled child to die", func() bool { return !testkit.Alive(pid) })
		took := time.Since(begin)
		if took > 5*time.Second {
			t.Errorf("%s: the child died %s after qd cancel; it waited for a heartbeat", tt.where, took)
		}
		t.Logf("qd cancel to child death, %s: %s (target %s)", tt.where, took.Round(time.Millisecond), tt.target)
		waitShow(t, qd, db, id, 10*time.Second, "cancelled", func(s shown) bool { return s.Task.State == "cancelled" })
	}
}

// Ensure an agent's follow-up tasks go through its daemon's socket into the
// daemon's own queue, whatever the agent's working directory config and PG
// variables say (here: another database), record the run that enqueued
// them, and run.
func TestNow_AgentFollowUps(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(work, "qd.hcl"), "database = \"postgres://postgres@127.0.0.1:5432/qd_elsewhere_nonexistent?sslmode=disable\"\n")
	planner := testkit.MustScript(t, dir, "planner.sh", `
export PGDATABASE=qd_elsewhere_nonexistent PGHOST=127.0.0.1
for n in 1 2; do
  "$PLAN_QD" enqueue --lane follow --agent follow "{\"n\": $n}" >> "`+dir+`/children" || exit 1
done
`)
	body := fmt.Sprintf("agent \"planner\" {\n  command = [%q]\n  dir = %q\n  schedule = \"@every 1s\"\n  env = { PLAN_QD = %q }\n}\n", planner, work, qd) +
		nowAgent("follow", startMarker(t, dir, "0"), "@hourly")
	testkit.StartDaemon(t, qd, db, "planner", body, testkit.DaemonOptions{})
	parent := enqueue(t, qd, db, "plan", "planner")
	waitShow(t, qd, db, parent, 20*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	ids := strings.Fields(readFile(t, filepath.Join(dir, "children")))
	if len(ids) != 2 {
		t.Fatalf("the planner enqueued %v, want two task ids", ids)
	}
	run := showTask(t, qd, db, parent).Runs[0].ID
	for _, id := range ids {
		s := waitShow(t, qd, db, id, 20*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
		if s.Task.ParentRun != run {
			t.Errorf("follow-up %s: parent_run %d, want the planner's run %d", id, s.Task.ParentRun, run)
		}
	}
}
