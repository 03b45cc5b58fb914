package e2e

import (
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure qd logs --agent --follow prints an agent's runs as they start,
// each headed by its run and attempt and ended by how it ended (a failed
// attempt says when the next comes), until the third run completes; and
// that --stderr prints only what the agent wrote to stderr.
func TestLogs_AgentFollowAcrossRuns(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	script := testkit.MustScript(t, dir, "thrice.sh", `
echo "out $QD_ATTEMPT"
echo "err $QD_ATTEMPT" >&2
sleep 0.3
[ "$QD_ATTEMPT" -ge 3 ]
`)
	body := fmt.Sprintf("agent \"thrice\" {\n  command = [%q]\n  schedule = \"@every 1s\"\n  retry_backoff = \"1s\"\n}\n", script)
	d := testkit.StartDaemon(t, qd, db, "logs", body, testkit.DaemonOptions{})
	follow := exec.Command(qd, "logs", "--config", d.Config, "--agent", "thrice", "--follow")
	follow.Env = append(testkit.Environ(), "QD_DATABASE_URL="+db)
	var out, errOut testkit.SyncBuffer
	follow.Stdout, follow.Stderr = &out, &errOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	defer follow.Process.Kill()
	id := enqueue(t, qd, db, "l", "thrice", "--max-attempts", "3")
	testkit.Eventually(t, 30*time.Second, "the third run's end in qd logs --follow", func() bool {
		return strings.Contains(out.String(), "ended: completed")
	})
	follow.Process.Signal(syscall.SIGTERM)
	if err := follow.Wait(); err != nil || strings.Contains(errOut.String(), "context canceled") {
		t.Errorf("qd logs --follow stopped by SIGTERM: %v, stderr %q; want exit 0 and no error", err, errOut.String())
	}
	got := out.String()
	for i := 1; i <= 3; i++ {
		for _, want := range []string{fmt.Sprintf("attempt %d, lane l", i), fmt.Sprintf("out %d\n", i), fmt.Sprintf("err %d\n", i)} {
			if !strings.Contains(got, want) {
				t.Errorf("qd logs --follow lacks %q:\n%s", want, got)
			}
		}
	}
	if n := strings.Count(got, "==> run "); n != 6 {
		t.Errorf("%d header and end lines, want 3 of each:\n%s", n, got)
	}
	if !strings.Contains(got, "failed, exit code 1: exited 1: err 1; task "+id+": next attempt (2 of 3)") ||
		!strings.Contains(got, "ended: completed, exit code 0: out 3; task "+id+" done") {
		t.Errorf("the end lines do not say how each run ended and what comes next:\n%s", got)
	}
	only := testkit.MustQD(t, qd, db, "logs", "--config", d.Config, "--agent", "thrice", "--stderr")
	if strings.Contains(only, "out ") || strings.Count(only, "err ") != 3 {
		t.Errorf("qd logs --stderr printed:\n%s", only)
	}
}

// Ensure qd logs --task --follow waits for a task's first run when none is
// claimed yet, follows each of its runs as it starts, and ends by itself
// once the task has.
func TestLogs_TaskFollow(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	script := testkit.MustScript(t, t.TempDir(), "twice.sh", `
echo "try $QD_ATTEMPT"
[ "$QD_ATTEMPT" -ge 2 ]
`)
	d := testkit.StartDaemon(t, qd, db, "tasklogs", fmt.Sprintf("agent \"twice\" {\n  command = [%q]\n  schedule = \"@every 1s\"\n  retry_backoff = \"1s\"\n}\n", script), testkit.DaemonOptions{})
	id := enqueue(t, qd, db, "tl", "twice", "--in", "2s")
	follow := exec.Command(qd, "logs", "--config", d.Config, "--task", id, "--follow")
	follow.Env = append(testkit.Environ(), "QD_DATABASE_URL="+db)
	var out, errOut testkit.SyncBuffer
	follow.Stdout, follow.Stderr = &out, &errOut
	if err := follow.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- follow.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("qd logs --task --follow: %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		follow.Process.Kill()
		t.Fatalf("qd logs --task --follow did not end with its task:\n%s\n%s", out.String(), errOut.String())
	}
	got := out.String()
	for _, want := range []string{"try 1\n", "try 2\n", "attempt 1, lane tl", "attempt 2, lane tl", "task " + id + " done"} {
		if !strings.Contains(got, want) {
			t.Errorf("qd logs --task --follow lacks %q:\n%s", want, got)
		}
	}
	if !strings.Contains(errOut.String(), "task "+id+" has no run yet (queued") {
		t.Errorf("qd logs --task --follow did not say it waits for the first run:\n%s", errOut.String())
	}
}

// Ensure an agent with output = "merged" has what it writes to stdout and
// stderr back to back in the order written, through the daemon and
// `qd logs`.
func TestLogs_MergedOutputInOrder(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	script := testkit.MustScript(t, t.TempDir(), "pairs.sh", `i=0
while [ $i -lt 500 ]; do echo "out $i"; echo "err $i" >&2; i=$((i+1)); done`)
	testkit.StartDaemon(t, qd, db, "merged", fmt.Sprintf("agent \"pairs\" {\n  command = [%q]\n  schedule = \"@every 1s\"\n  output = \"merged\"\n}\n", script), testkit.DaemonOptions{})
	id := enqueue(t, qd, db, "mo", "pairs")
	s := waitShow(t, qd, db, id, 30*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	var want strings.Builder
	for i := range 500 {
		fmt.Fprintf(&want, "out %d\nerr %d\n", i, i)
	}
	out := testkit.MustQD(t, qd, db, "logs", strconv.FormatInt(s.Runs[0].ID, 10))
	if out+"\n" != want.String() && out != want.String() {
		t.Errorf("qd logs of the merged run: %d bytes, not the 1,000 lines in the order written", len(out))
	}
}
