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

// Ensure `qd status --runs N` lists the N oldest runs in flight and counts
// the rest, in the table and in JSON (runs_total), --runs all and --json
// list every one, and a --runs that is not a count is a usage error.
func TestDaemon_StatusListsTheOldestRuns(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	testkit.MustQD(t, qd, db, "lane", "set", "many", "--max-running", "5")
	for range 5 {
		enqueue(t, qd, db, "many", "idle")
	}
	d := testkit.StartDaemon(t, qd, db, "status-runs", `
agent "idle" {
  command  = ["sleep", "600"]
  schedule = "@every 1s"
  lanes    = ["many"]
  parallel = 5
}`, testkit.DaemonOptions{})
	type snap struct {
		Runs []struct {
			RunID      int64   `json:"run_id"`
			AgeSeconds float64 `json:"age_seconds"`
		} `json:"runs"`
		RunsTotal int `json:"runs_total"`
	}
	status := func(args ...string) snap {
		out := testkit.MustQD(t, qd, db, append([]string{"status", "--socket", d.Socket, "--json"}, args...)...)
		var s snap
		if err := json.Unmarshal([]byte(out), &s); err != nil {
			t.Fatalf("qd status --json %v: %v\n%s", args, err, out)
		}
		return s
	}
	testkit.Eventually(t, 20*time.Second, "5 runs in flight", func() bool { return status().RunsTotal == 5 })
	all := status()
	if len(all.Runs) != 5 {
		t.Fatalf("qd status --json listed %d runs of %d, want every one", len(all.Runs), all.RunsTotal)
	}
	two := status("--runs", "2")
	if two.RunsTotal != 5 || len(two.Runs) != 2 {
		t.Fatalf("qd status --json --runs 2: %d listed, runs_total %d; want 2 and 5", len(two.Runs), two.RunsTotal)
	}
	// Oldest first: the two listed are the first two of the full list.
	for i := range two.Runs {
		if two.Runs[i].RunID != all.Runs[i].RunID {
			t.Errorf("qd status --runs 2 listed run %d at %d; the oldest there is %d", two.Runs[i].RunID, i, all.Runs[i].RunID)
		}
	}
	human := testkit.MustQD(t, qd, db, "status", "--socket", d.Socket, "--runs", "2")
	if !strings.Contains(human, "… and 3 more") || !strings.Contains(human, "5 in flight") {
		t.Errorf("qd status --runs 2 does not count the 3 runs it left out:\n%s", human)
	}
	// A row of the table starts with its run's id.
	listed := func(text string, id int64) bool {
		for _, line := range strings.Split(text, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[0] == strconv.FormatInt(id, 10) && f[2] == "many" {
				return true
			}
		}
		return false
	}
	for _, r := range all.Runs[2:] {
		if listed(human, r.RunID) {
			t.Errorf("qd status --runs 2 listed run %d, the third or younger:\n%s", r.RunID, human)
		}
	}
	every := testkit.MustQD(t, qd, db, "status", "--socket", d.Socket, "--runs", "all")
	for _, r := range all.Runs {
		if !listed(every, r.RunID) {
			t.Errorf("qd status --runs all lacks run %d:\n%s", r.RunID, every)
		}
	}
	if strings.Contains(every, "more") {
		t.Errorf("qd status --runs all says some were left out:\n%s", every)
	}
	_, errOut, code := testkit.QD(t, qd, db, "status", "--socket", d.Socket, "--runs", "some")
	if code != 2 || !strings.Contains(errOut, "--runs") {
		t.Errorf("qd status --runs some: exit %d, stderr %q; want 2 naming --runs", code, errOut)
	}
}
