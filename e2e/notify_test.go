package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// failingAgent exits 1 after writing its reason to stderr.
func failingAgent(t *testing.T, dir string) string {
	return testkit.MustScript(t, dir, "fails.sh", `
echo "working on $QD_TASK_ID"
echo "upstream returned 503" >&2
echo "cleaning up"
exit 1
`)
}

// recorder is a notification command that appends each event's JSON, and
// its QD_EVENT, to a file, in one write (two daemons may run it at once).
func recorder(t *testing.T, dir string) (script, out string) {
	out = filepath.Join(dir, "told.jsonl")
	script = testkit.MustScript(t, dir, "record.sh", `
line="$QD_EVENT $(cat)"
printf '%s\n' "$line" >> "`+out+`"
`)
	return script, out
}

type told struct {
	Event   string `json:"event"`
	TaskID  int64  `json:"task_id"`
	RunID   int64  `json:"run_id"`
	Agent   string `json:"agent"`
	Outcome string `json:"outcome"`
	Summary string `json:"summary"`
	Host    string `json:"host"`
}

// readTold reads the recorder's file: the QD_EVENT and the JSON of each
// notification.
func readTold(t *testing.T, path string) (envs []string, events []told) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		env, js, _ := strings.Cut(line, " ")
		var e told
		if err := json.Unmarshal([]byte(js), &e); err != nil {
			t.Fatalf("notification JSON %q: %v", js, err)
		}
		envs, events = append(envs, env), append(events, e)
	}
	return envs, events
}

// Ensure a task that fails for good is told to the on_failure command (JSON
// on stdin, QD_EVENT set) and to the webhook, with the reason the agent
// wrote to stderr; that qd show lists both notifications as sent; and that
// qd status shows the agent's last outcome and the notifications sent.
func TestNotify_CommandAndWebhook(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	script, out := recorder(t, dir)
	var mu sync.Mutex
	var posted []told
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var e told
		if json.Unmarshal(b, &e) == nil && r.Method == http.MethodPost {
			mu.Lock()
			posted = append(posted, e)
			mu.Unlock()
		}
		w.WriteHeader(http.StatusAccepted)
	}))
	defer hook.Close()
	body := fmt.Sprintf("on_failure = [%q]\nwebhook = %q\n", script, hook.URL) + nowAgent("fails", failingAgent(t, dir), "@every 1s")
	d := testkit.StartDaemon(t, qd, db, "notify", body, testkit.DaemonOptions{})
	id := enqueue(t, qd, db, "n", "fails", "--max-attempts", "1")
	waitShow(t, qd, db, id, 20*time.Second, "failed", func(s shown) bool { return s.Task.State == "failed" })
	testkit.Eventually(t, 10*time.Second, "the command and the webhook to be told", func() bool {
		_, events := readTold(t, out)
		mu.Lock()
		defer mu.Unlock()
		return len(events) == 1 && len(posted) == 1
	})
	envs, events := readTold(t, out)
	want := "exited 1: upstream returned 503"
	if e := events[0]; envs[0] != "failed" || e.Event != "failed" || e.Summary != want || e.Agent != "fails" || e.Outcome != "failed" || e.Host == "" {
		t.Errorf("the command was told %s %+v, want event failed with summary %q", envs[0], e, want)
	}
	mu.Lock()
	if e := posted[0]; e.Event != "failed" || e.Summary != want {
		t.Errorf("the webhook was told %+v", e)
	}
	mu.Unlock()
	var parsed struct {
		Notifications []map[string]any `json:"notifications"`
	}
	testkit.Eventually(t, 5*time.Second, "both notifications recorded as sent", func() bool {
		raw := testkit.MustQD(t, qd, db, "show", id, "--json")
		parsed.Notifications = nil
		_ = json.Unmarshal([]byte(raw), &parsed)
		sent := 0
		for _, n := range parsed.Notifications {
			if n["status"] == "sent" && n["event"] == "failed" && n["sent_by"] == "notify" {
				sent++
			}
		}
		return sent == 2
	})
	s := d.Status(t)
	if len(s.Agents) != 1 || s.Agents[0].Last == nil || s.Agents[0].Last.Outcome != "failed" || s.Agents[0].Last.Summary != want {
		t.Errorf("status of the agent: %+v, want its last outcome failed, %q", s.Agents, want)
	}
	if s.Notifications.Sent != 2 {
		t.Errorf("status counts %+v notifications, want 2 sent", s.Notifications)
	}
}

// Ensure two daemons sharing a queue, with the same notifications, tell
// each failed task once.
func TestNotify_TwoDaemonsOnce(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	script, out := recorder(t, dir)
	body := fmt.Sprintf("on_failure = [%q]\n", script) + nowAgent("fails", failingAgent(t, dir), "@every 1s") + `
lane "n2" {
  max_running = 4
}`
	testkit.StartDaemon(t, qd, db, "notify-a", body, testkit.DaemonOptions{})
	testkit.StartDaemon(t, qd, db, "notify-b", body, testkit.DaemonOptions{})
	var ids []string
	for range 6 {
		ids = append(ids, enqueue(t, qd, db, "n2", "fails", "--max-attempts", "1"))
	}
	for _, id := range ids {
		waitShow(t, qd, db, id, 30*time.Second, "failed", func(s shown) bool { return s.Task.State == "failed" })
	}
	time.Sleep(2 * time.Second) // any second telling would come by now
	_, events := readTold(t, out)
	seen := map[int64]int{}
	for _, e := range events {
		seen[e.TaskID]++
	}
	if len(events) != len(ids) || len(seen) != len(ids) {
		t.Errorf("%d notifications for %d failed tasks (%v), want one each", len(events), len(ids), seen)
	}
}

// Ensure qd status shows the periodic schedules with their next and last
// tick, warns of queued tasks whose agent no daemon runs, and still reaches
// the daemon when the config on disk has become invalid, showing the
// reload error.
func TestStatus_ShowsEverything(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	body := nowAgent("w", startMarker(t, dir, "0"), "@hourly") + `
periodic "often" {
  schedule = "@every 1s"
  agent    = "w"
}`
	d := testkit.StartDaemon(t, qd, db, "status-all", body, testkit.DaemonOptions{})
	enqueue(t, qd, db, "elsewhere", "nobody")
	testkit.Eventually(t, 20*time.Second, "the periodic's last tick and the unserved agent in the status", func() bool {
		s := d.Status(t)
		return len(s.Periodics) == 1 && s.Periodics[0].LastTick != nil && s.Periodics[0].NextTick != nil &&
			len(s.Unserved) == 1 && s.Unserved[0].Agent == "nobody" && s.Unserved[0].Queued == 1
	})
	out := testkit.MustQD(t, qd, db, "status", "--config", d.Config)
	for _, want := range []string{"PERIODIC", "often", "WARNING: 1 queued task of agent nobody, which no running daemon runs: it waits until one does"} {
		if !strings.Contains(out, want) {
			t.Errorf("qd status lacks %q:\n%s", want, out)
		}
	}
	writeFile(t, d.Config, readFile(t, d.Config)+"\nbogus_setting = 1\n")
	d.Signal(syscall.SIGHUP)
	testkit.Eventually(t, 10*time.Second, "the reload error", func() bool { return d.Status(t).ConfigError != "" })
	out, errOut, code := testkit.QD(t, qd, db, "status", "--config", d.Config)
	if code != 0 || !strings.Contains(out, "last reload failed") || !strings.Contains(errOut, "is invalid, asking the socket it names") {
		t.Errorf("qd status with an invalid config: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}

// Ensure the example notifiers work as on_failure commands: the mail one
// hands a message naming the task and its summary to sendmail, the desktop
// one calls notify-send (both faked on PATH here).
func TestNotify_Examples(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	testkit.MustScript(t, dir, "sendmail", `cat > "`+dir+`/mail"`)
	testkit.MustScript(t, dir, "notify-send", `printf '%s|' "$@" > "`+dir+`/desktop"`)
	env := []string{"PATH=" + dir + ":/usr/bin:/bin", "QD_EVENT=failed", "QD_TASK_ID=7", "QD_RUN_ID=9", "QD_AGENT=build",
		"QD_LANE=ci", "QD_ATTEMPT=3", "QD_MAX_ATTEMPTS=3", "QD_OUTCOME=failed", "QD_SUMMARY=exited 1: upstream returned 503", "QD_HOST=box"}
	for _, tt := range []struct{ script, out, want string }{
		{"notify-mail.sh", "mail", "Subject: qd: failed of task 7 (agent build) on box"},
		{"notify-desktop.sh", "desktop", "qd: failed: build task 7|exited 1: upstream returned 503|"},
	} {
		cmd := exec.Command("../examples/"+tt.script, "me@example.com")
		cmd.Env, cmd.Stdin = env, strings.NewReader(`{"event":"failed"}`)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", tt.script, err, out)
			continue
		}
		if got := readFile(t, filepath.Join(dir, tt.out)); !strings.Contains(got, tt.want) {
			t.Errorf("%s wrote %q, want %q in it", tt.script, got, tt.want)
		}
	}
}
