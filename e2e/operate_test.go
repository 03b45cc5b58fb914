package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure `qd status` shows a live run with silent_seconds (seconds since its
// last heartbeat answer) kept small by heartbeats while the run grows older,
// in JSON and in the table, and `qd logs RUN` prints the live run's output
// from its log file.
func TestDaemon_StatusAndLogsOfLiveRun(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	agent := testkit.MustScript(t, t.TempDir(), "talk.sh", "echo first line\necho second line >&2\nexec sleep 1000\n")
	id := enqueue(t, qd, db, "st", "talk")
	d := testkit.StartDaemon(t, qd, db, "status", fmt.Sprintf(`
agent "talk" {
  command   = [%q]
  schedule  = "@every 1s"
  lease     = "3s"
  heartbeat = "1s"
}`, agent), testkit.DaemonOptions{})

	type run struct {
		RunID         int64    `json:"run_id"`
		TaskID        int64    `json:"task_id"`
		Agent         string   `json:"agent"`
		AgeSeconds    float64  `json:"age_seconds"`
		SilentSeconds *float64 `json:"silent_seconds"`
	}
	var r run
	testkit.Eventually(t, 20*time.Second, "a run 2.5s old in qd status --json", func() bool {
		out := testkit.MustQD(t, qd, db, "status", "--socket", d.Socket, "--json")
		var st struct {
			Runs []run `json:"runs"`
		}
		if err := json.Unmarshal([]byte(out), &st); err != nil {
			t.Fatalf("qd status --json: %v\n%s", err, out)
		}
		if len(st.Runs) != 1 {
			return false
		}
		r = st.Runs[0]
		return r.AgeSeconds >= 2.5
	})
	if fmt.Sprint(r.TaskID) != id || r.Agent != "talk" {
		t.Errorf("status run %+v: want task %s of agent talk", r, id)
	}
	if r.SilentSeconds == nil {
		t.Fatalf("status run %+v has no silent_seconds", r)
	}
	if *r.SilentSeconds < 0 || *r.SilentSeconds > 2 {
		t.Errorf("silent_seconds %.2f for a run %.1fs old heartbeated every 1s: want 0..2", *r.SilentSeconds, r.AgeSeconds)
	}
	human := testkit.MustQD(t, qd, db, "status", "--socket", d.Socket)
	if !strings.Contains(human, "SILENT") || !containsRow(human, strconv.FormatInt(r.RunID, 10), id, "talk") {
		t.Errorf("qd status table lacks the SILENT column or run %d:\n%s", r.RunID, human)
	}

	out, errOut, code := testkit.QD(t, qd, db, "logs", strconv.FormatInt(r.RunID, 10), "--config", d.Config)
	if code != 0 || !strings.Contains(out, "first line\n") || !strings.Contains(out, "second line\n") {
		t.Errorf("qd logs %d: exit %d, stdout %q; want both lines of the live run", r.RunID, code, out)
	}
	if !strings.Contains(errOut, "log file") {
		t.Errorf("qd logs %d: stderr %q does not say the log file is shown", r.RunID, errOut)
	}
}

// containsRow reports whether a line of text has every field, in order.
func containsRow(text string, fields ...string) bool {
	for _, line := range strings.Split(text, "\n") {
		f := strings.Fields(line)
		i := 0
		for _, w := range f {
			if i < len(fields) && w == fields[i] {
				i++
			}
		}
		if i == len(fields) {
			return true
		}
	}
	return false
}

// Ensure `qd cancel` of a task running under a daemon stops the child's whole
// process group, a backgrounded grandchild included, within about a
// heartbeat interval, and settles the run as cancelled.
func TestDaemon_CancelRunningTask(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	childPID, gcPID := filepath.Join(dir, "child.pid"), filepath.Join(dir, "grandchild.pid")
	agent := testkit.MustScript(t, dir, "busy.sh", fmt.Sprintf(`sleep 1000 &
echo $! > %s
echo $$ > %s
echo working
exec sleep 1000
`, gcPID, childPID))
	id := enqueue(t, qd, db, "cx", "busy")
	testkit.StartDaemon(t, qd, db, "cancel", fmt.Sprintf(`
agent "busy" {
  command   = [%q]
  schedule  = "@every 1s"
  lease     = "3s"
  heartbeat = "1s"
}`, agent), testkit.DaemonOptions{})
	child, gc := readPID(t, childPID, 15*time.Second), readPID(t, gcPID, 15*time.Second)
	if !testkit.Alive(child) || !testkit.Alive(gc) {
		t.Fatalf("child %d or grandchild %d not running before the cancel", child, gc)
	}
	out := testkit.MustQD(t, qd, db, "cancel", id)
	if !strings.Contains(out, "running") {
		t.Errorf("qd cancel of a running task said %q", out)
	}
	// One heartbeat interval (1s) to learn of it, plus room for a busy machine.
	testkit.Eventually(t, 4*time.Second, "the child's group to be gone", func() bool {
		return !testkit.Alive(child) && !testkit.Alive(gc)
	})
	s := waitShow(t, qd, db, id, 10*time.Second, "cancelled", func(s shown) bool { return s.Task.State == "cancelled" })
	if len(s.Runs) != 1 || s.Runs[0].State != "cancelled" {
		t.Fatalf("runs %v, want one cancelled", runStates(s))
	}
}
