package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/internal/localpg"
	"github.com/qd-run/qd/internal/testkit"
)

// privateDaemon starts a daemon with no database configured, on the
// private cluster of work/state/pg, and returns it with a function that
// runs a qd command on its config.
func privateDaemon(t *testing.T, work, body string, env ...string) (*testkit.Daemon, func(args ...string) string) {
	t.Helper()
	qd := testkit.MustBuild(t)
	d := testkit.StartDaemon(t, qd, "", "private", body, testkit.DaemonOptions{Dir: work, Env: env})
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := testkit.QD(t, qd, "", append(args, "--config", d.Config)...)
		if code != 0 {
			t.Fatalf("qd %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return strings.TrimSpace(out)
	}
	return d, cli
}

// clusterURL is the URL of the running private cluster of work.
func clusterURL(t *testing.T, work string) string {
	t.Helper()
	url, ok := localpg.New(filepath.Join(work, "state", "pg"), localpg.Options{}).Running()
	if !ok {
		t.Fatal("the private cluster does not run")
	}
	return url
}

// taskState asks the server at url, on a connection of its own, for the
// state of task id; ok is false when the server does not answer.
func taskState(url string, id string) (state string, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", false
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(ctx, "SELECT state FROM qd.tasks WHERE id = $1", id).Scan(&state); err != nil {
		return "", false
	}
	return state, true
}

// postmasterPID reads the pid in the cluster's postmaster.pid, 0 when
// there is none.
func postmasterPID(work string) int {
	b, err := os.ReadFile(filepath.Join(work, "state", "pg", "data", "postmaster.pid"))
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, _ := strconv.Atoi(strings.TrimSpace(line))
	return pid
}

// Ensure a daemon run as systemd runs it ($INVOCATION_ID set) owns the
// stop of its private cluster, with signals sent as KillMode=mixed sends
// them: SIGTERM to the daemon alone while a child runs. The cluster
// answers until the child has finished and its run is settled, and it is
// stopped cleanly (a fast shutdown, postmaster.pid gone) before the
// daemon exits, so that systemd's SIGKILL to what is left of the unit
// finds nothing.
func TestPrivateCluster_StoppedAfterDrainUnderService(t *testing.T) {
	t.Parallel()
	work := mustQuickstartDir(t, -1, -1)
	agent := filepath.Join(work, "slow.sh")
	writeFile(t, agent, "#!/bin/sh\ntrap 'sleep 2; echo finished; exit 0' TERM\nwhile :; do sleep 0.05; done\n")
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	d, cli := privateDaemon(t, work, `agent "slow" {
  command  = ["`+agent+`"]
  schedule = "@every 1s"
}`, "INVOCATION_ID=e2e0000000000000")
	id := cli("enqueue", "--agent", "slow", "--lane", "s")
	url := clusterURL(t, work)
	testkit.Eventually(t, 15*time.Second, "the task running", func() bool {
		s, _ := taskState(url, id)
		return s == "running"
	})
	pid := postmasterPID(work)
	time.Sleep(300 * time.Millisecond) // the child has set its trap
	d.Signal(syscall.SIGTERM)

	var firstFail time.Time // when the cluster first did not answer
	answered := 0
	for !d.Exited() {
		if _, ok := taskState(url, id); ok && firstFail.IsZero() {
			answered++
		} else if !ok && firstFail.IsZero() {
			firstFail = time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code := d.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("the daemon exited %d:\n%s", code, d.Log())
	}
	if left := postmasterPID(work); left != 0 {
		t.Fatalf("the daemon exited leaving its cluster running (postmaster.pid names %d)", left)
	}
	if testkit.Alive(pid) {
		t.Errorf("the postmaster %d outlived the daemon", pid)
	}
	// Started again, the cluster says when the run was settled, by the
	// clock of this host: before the cluster first failed to answer.
	url = strings.TrimSpace(cli("db", "start"))
	var state string
	var finished time.Time
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, "SELECT state, finished_at FROM qd.runs WHERE task_id = $1", id).Scan(&state, &finished); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d answers during the drain; run %s at %s, cluster gone %s later", answered, state,
		finished.Format("15:04:05.000"), firstFail.Sub(finished).Round(time.Millisecond))
	if state != "completed" || firstFail.IsZero() || !finished.Before(firstFail) || answered < 10 {
		t.Errorf("run %s finished at %s, cluster first silent at %s after %d answers: want a completed run settled while the cluster answered",
			state, finished.Format("15:04:05.000"), firstFail.Format("15:04:05.000"), answered)
	}
	log := readFile(t, filepath.Join(work, "state", "pg", "server.log"))
	for _, want := range []string{"received fast shutdown request", "database system is shut down"} {
		if !strings.Contains(log, want) {
			t.Errorf("the server's log lacks %q: not a clean stop\n%s", want, log)
		}
	}
	dl := d.Log()
	if i, j := strings.Index(dl, "stopped the private PostgreSQL"), strings.Index(dl, "qd stopped"); i < 0 || j < i {
		t.Errorf("the daemon's log does not say it stopped the cluster before it stopped:\n%s", dl)
	}
}

// Ensure the private cluster killed with SIGKILL under a running daemon
// answers again within 2 s, started by the daemon (no qd command runs
// meanwhile), and no task is lost: the run in flight at the kill
// completes, and the tasks queued before and after it are done, each
// with one run.
func TestPrivateCluster_StartedAgainAfterKill(t *testing.T) {
	t.Parallel()
	work := mustQuickstartDir(t, -1, -1)
	agent := filepath.Join(work, "work.sh")
	writeFile(t, agent, "#!/bin/sh\nsleep 3\necho worked\n")
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	d, cli := privateDaemon(t, work, `agent "work" {
  command  = ["`+agent+`"]
  schedule = "@every 1s"
  lease    = "30s"
}`)
	ids := []string{cli("enqueue", "--agent", "work", "--lane", "k"), cli("enqueue", "--agent", "work", "--lane", "k")}
	url := clusterURL(t, work)
	testkit.Eventually(t, 15*time.Second, "the first task running", func() bool {
		s, _ := taskState(url, ids[0])
		return s == "running"
	})
	pid := postmasterPID(work)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	for {
		if _, ok := taskState(url, ids[0]); ok {
			break
		}
		if time.Since(killed) > 2*time.Second {
			t.Fatalf("the cluster does not answer 2s after kill -9 of its postmaster:\n%s", d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	back := time.Since(killed)
	t.Logf("the cluster answered again %s after kill -9 of its postmaster", back.Round(time.Millisecond))
	if again := postmasterPID(work); again == pid || again == 0 {
		t.Errorf("postmaster.pid names %d after the kill of %d", again, pid)
	}
	ids = append(ids, cli("enqueue", "--agent", "work", "--lane", "k"))
	for _, id := range ids {
		testkit.Eventually(t, 30*time.Second, "task "+id+" done", func() bool {
			s, _ := taskState(url, id)
			return s == "done"
		})
	}
	for _, id := range ids {
		var s shown
		if err := json.Unmarshal([]byte(cli("show", id, "--json")), &s); err != nil {
			t.Fatal(err)
		}
		if got := runStates(s); len(got) != 1 || got[0] != "completed" {
			t.Errorf("task %s ran %v, want one completed run", id, got)
		}
	}
	for _, want := range []string{"died; starting it again", "/state/pg again"} {
		if !strings.Contains(d.Log(), want) {
			t.Errorf("the daemon's log lacks %q:\n%s", want, d.Log())
		}
	}
}
