package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure the page's Run now and Enqueue say what qd run-now and qd enqueue
// say: Run now takes the agent's first lane when none is given, refuses an
// agent no daemon runs and a lane the agent does not serve, and counts
// only the daemons that claim it; Enqueue queues for an unknown agent or
// a lane the agent does not serve, and says the task will wait.
func TestUI_RunNowLikeTheCLI(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	agent := testkit.MustScript(t, dir, "build.sh", "echo built\n")
	addr := freePort(t)
	testkit.StartDaemon(t, qd, db, "actions", fmt.Sprintf(`agent "build" {
  command  = [%q]
  schedule = "@every 1h"
  lanes    = ["ci", "nightly"]
}
ui {
  listen = %q
}`, agent, addr), testkit.DaemonOptions{})
	post := func(path string, form url.Values) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Accept", "application/json")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		var resp *http.Response
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if resp, err = http.DefaultClient.Do(req); err == nil || time.Now().After(deadline) {
				break
			}
			req.Body = io.NopCloser(strings.NewReader(form.Encode()))
		}
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := post("/actions/run-now", url.Values{"agent": {"build"}})
	var res struct {
		Message string `json:"message"`
		TaskID  int64  `json:"task_id"`
	}
	if err := json.Unmarshal([]byte(body), &res); code != http.StatusOK || err != nil {
		t.Fatalf("run now: %d %s", code, body)
	}
	if !strings.Contains(res.Message, "lane ci") || !strings.Contains(res.Message, "1 daemon(s) woken") {
		t.Errorf("run now without a lane: %q, want lane ci and one daemon woken", res.Message)
	}
	id := fmt.Sprint(res.TaskID)
	waitShow(t, qd, db, id, 15*time.Second, "the task to run at once", func(s shown) bool { return s.Task.State == "done" })

	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"agent": {"build"}, "lane": {"default"}}, `lane "default" is not among the lanes of agent build (ci, nightly)`},
		{url.Values{"agent": {"nope"}}, `no living daemon runs agent "nope"; they run: build`},
	} {
		code, body := post("/actions/run-now", c.form)
		var refusal struct{ Error string }
		_ = json.Unmarshal([]byte(body), &refusal)
		if code != http.StatusBadRequest || !strings.Contains(refusal.Error, c.want) {
			t.Errorf("run now %v: %d %s, want 400 saying %q", c.form, code, body, c.want)
		}
	}
	for _, c := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"agent": {"nope"}}, "no living daemon runs agent nope, so the task waits until one does"},
		{url.Values{"agent": {"build"}, "lane": {"other"}}, "agent build serves lanes ci, nightly, not other, so the task waits"},
	} {
		if code, body := post("/actions/enqueue", c.form); code != http.StatusOK || !strings.Contains(body, c.want) {
			t.Errorf("enqueue %v: %d %s, want 200 saying %q", c.form, code, body, c.want)
		}
	}
}

// Ensure qd enqueue says so when the daemon on this host runs the agent
// for other lanes only (the task then waits), as it does for an agent the
// daemon does not run, and says nothing for a lane the agent serves.
func TestEnqueue_WarnsOfALaneTheAgentDoesNotServe(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	agent := testkit.MustScript(t, t.TempDir(), "build.sh", "echo built\n")
	d := testkit.StartDaemon(t, qd, db, "lanewarn", fmt.Sprintf(`agent "build" {
  command  = [%q]
  schedule = "@every 1h"
  lanes    = ["ci"]
}`, agent), testkit.DaemonOptions{})
	_, errOut, code := testkit.QD(t, qd, db, "enqueue", "--agent", "build", "--lane", "other", "--config", d.Config)
	if want := "qd: agent build of the daemon at " + d.Socket + " serves lanes ci, not other; task 1 waits for a daemon whose agent build serves lane other"; code != 0 || !strings.Contains(errOut, want) {
		t.Errorf("enqueue for a lane the agent does not serve: exit %d, stderr %q; want 0 and %q", code, errOut, want)
	}
	if _, errOut, code := testkit.QD(t, qd, db, "enqueue", "--agent", "build", "--lane", "ci", "--config", d.Config); code != 0 || errOut != "" {
		t.Errorf("enqueue for the agent's lane: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
}

// Ensure a restarted daemon's status still says how each agent's last run
// ended, read back from the queue.
func TestStatus_LastOutcomeSurvivesRestart(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	agent := testkit.MustScript(t, t.TempDir(), "build.sh", "echo built it\n")
	body := fmt.Sprintf(`agent "build" {
  command  = [%q]
  schedule = "@every 1s"
}`, agent)
	d := testkit.StartDaemon(t, qd, db, "recall", body, testkit.DaemonOptions{})
	id := enqueue(t, qd, db, "r", "build")
	waitShow(t, qd, db, id, 15*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	run := showTask(t, qd, db, id).Runs[0].ID
	d.Signal(syscall.SIGTERM)
	d.Wait(t, 20*time.Second)
	d = testkit.StartDaemon(t, qd, db, "recall", body, testkit.DaemonOptions{Dir: d.Dir})
	testkit.Eventually(t, 10*time.Second, "the last outcome read back", func() bool {
		s := d.Status(t)
		return len(s.Agents) == 1 && s.Agents[0].Last != nil && s.Agents[0].Last.RunID == run &&
			s.Agents[0].Last.Summary == "built it"
	})
}
