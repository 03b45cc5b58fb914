package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// rawRequestEnv, set to "METHOD PATH", makes the test binary send that one
// request to the socket $QD_SOCKET, with the token $QD_E2E_RAW_TOKEN when
// it is not empty, and print the answer's status code and first line: a
// client that is not qd, as curl would be.
const rawRequestEnv = "QD_E2E_RAW_REQUEST"

func rawRequest(req string) int {
	method, path, _ := strings.Cut(req, " ")
	sock := os.Getenv("QD_SOCKET")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	r, err := http.NewRequest(method, "http://qd"+path, nil)
	if err != nil {
		fmt.Println("0", err)
		return 1
	}
	if tok := os.Getenv("QD_E2E_RAW_TOKEN"); tok != "" {
		r.Header.Set(api.TokenHeader, tok)
	}
	resp, err := hc.Do(r)
	if err != nil {
		fmt.Println("0", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	fmt.Println(resp.StatusCode, line)
	return 0
}

// The hostile agent of TestSocket_RunsActOnlyOnThemselves. It waits for
// the victim's run, steals its token from /proc, and then for eight seconds
// (well past the victim's 3s stall_timeout, and on after it ended) tries to keep it alive, with
// `qd heartbeat` and with raw requests without a token, with a forged one
// and with the stolen one; once, it tries to cancel the victim's task the
// same ways, and from a process that left its group (setsid, after a
// double fork). Last it does what it may: heartbeat itself, enqueue a
// follow-up and cancel it. Each answer goes to a file in $OUT.
const hostileAgent = `set -u
o=$OUT
until [ -s "$o/victim" ]; do sleep 0.05; done
read b_run b_task b_pid < "$o/victim"
stolen=$(tr '\0' '\n' < /proc/$b_pid/environ | sed -n 's/^QD_RUN_TOKEN=//p')
printf '%s' "$stolen" > "$o/stolen"
raw() { # NAME METHOD PATH TOKEN; the answers one a line
  QD_E2E_RAW_REQUEST="$2 $3" QD_E2E_RAW_TOKEN="$4" "$RAW" >> "$o/raw.$1" 2>&1
}
escape() { # NAME METHOD PATH TOKEN, from a process out of this run's group
  QD_E2E_RAW_REQUEST="$2 $3" QD_E2E_RAW_TOKEN="$4" sh -c 'setsid "$RAW" > "$0.tmp" 2>&1 && mv "$0.tmp" "$0" &' "$o/raw.$1"
  until [ -e "$o/raw.$1" ]; do sleep 0.05; done
}
raw progress-stolen POST /v1/runs/$b_run/progress "$stolen"
raw cancel-stolen POST /v1/tasks/$b_task/cancel "$stolen"
escape cancel-setsid-stolen POST /v1/tasks/$b_task/cancel "$stolen"
"$QD" cancel "$b_task" > "$o/cancel.out" 2>&1; echo $? > "$o/cancel.code"
raw cancel-none POST /v1/tasks/$b_task/cancel ""
raw cancel-forged POST /v1/tasks/$b_task/cancel "forged-token"
escape cancel-setsid POST /v1/tasks/$b_task/cancel ""
escape progress-setsid POST /v1/runs/$b_run/progress ""
end=$(( $(date +%s) + 8 ))
while [ "$(date +%s)" -lt $end ]; do
  "$QD" heartbeat "$b_run" > /dev/null 2>> "$o/heartbeat.err"; echo $? >> "$o/heartbeat.codes"
  raw progress-none POST /v1/runs/$b_run/progress ""
  raw progress-forged POST /v1/runs/$b_run/progress "forged-token"
  raw progress-stolen POST /v1/runs/$b_run/progress "$stolen"
  sleep 0.3
done
if kill -0 $b_pid 2>/dev/null; then echo alive; else echo gone; fi > "$o/victim.after"
"$QD" heartbeat "$QD_RUN_ID" > "$o/self.out" 2>&1; echo $? > "$o/self.code"
"$QD" enqueue --lane follow --agent follow --in 1h > "$o/follow" 2>&1
"$QD" cancel "$(cat "$o/follow")" > "$o/follow.cancel" 2>&1; echo $? >> "$o/follow.cancel"
`

// Ensure one agent's child cannot act on another agent's run through the
// socket: `qd heartbeat` of the other run, and raw requests without a
// token, with a forged one, with one stolen from the other run's
// environment and from a process that left its group, are all refused
// (exit 1, 403) and logged; the victim is still stopped by its
// stall_timeout, its task is not cancelled and has no cancel request, and
// no token is logged. The hostile run may still heartbeat itself, and
// enqueue and cancel a follow-up of its own. The operator's `qd cancel`
// and a raw cancel on the socket still work, and record the request.
func TestSocket_RunsActOnlyOnThemselves(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	victim := testkit.MustScript(t, dir, "victim.sh", fmt.Sprintf(
		"echo \"$QD_RUN_ID $QD_TASK_ID $$\" > %[1]s/victim.tmp; mv %[1]s/victim.tmp %[1]s/victim\nexec sleep 1000\n", dir))
	hostile := testkit.MustScript(t, dir, "hostile.sh", hostileAgent)
	long := testkit.MustScript(t, dir, "long.sh", fmt.Sprintf("echo $$ > %s/long.$QD_TASK_ID\nexec sleep 1000\n", dir))
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := fmt.Sprintf("env = {\n    OUT = %q\n    QD = %q\n    RAW = %q\n    GORACE = \"atexit_sleep_ms=0\"\n  }", dir, qd, self)
	d := testkit.StartDaemon(t, qd, db, "hostile", fmt.Sprintf(`
agent "victim" {
  command       = [%q]
  schedule      = "@every 1s"
  stall_timeout = "3s"
  kill_grace    = "1s"
}
agent "hostile" {
  command  = [%q]
  schedule = "@every 1s"
  %s
}
agent "long" {
  command    = [%q]
  schedule   = "@every 1s"
  parallel   = 2
  kill_grace = "1s"
}`, victim, hostile, env, long), testkit.DaemonOptions{})
	cgroups := d.Status(t).Containment.Kind == "cgroup"
	if !cgroups && os.Getenv("CI") == "true" {
		t.Fatalf("runs not in cgroups under CI: %s", d.Status(t).Containment.Reason)
	}
	vTask := enqueue(t, qd, db, "v", "victim", "--max-attempts", "1")
	hTask := enqueue(t, qd, db, "h", "hostile", "--max-attempts", "1")

	h := waitShow(t, qd, db, hTask, 60*time.Second, "the hostile agent to finish", func(s shown) bool {
		return s.Task.State == "done" || s.Task.State == "failed"
	})
	if h.Task.State != "done" {
		t.Fatalf("hostile agent: task %s, runs %+v\n%s", h.Task.State, h.Runs, readFile(t, filepath.Join(dir, "victim")))
	}
	hRun := h.Runs[0].ID
	var bRun, bTask, bPid int64
	fmt.Sscan(readFile(t, filepath.Join(dir, "victim")), &bRun, &bTask, &bPid)
	if strconv.FormatInt(bTask, 10) != vTask {
		t.Fatalf("the victim's file names task %d, want %s", bTask, vTask)
	}
	out := func(name string) string { return strings.TrimSpace(readFile(t, filepath.Join(dir, name))) }

	// What the hostile agent was told.
	wantProgress := fmt.Sprintf("refused: run %d may report progress only for itself, not for run %d", hRun, bRun)
	wantCancel := fmt.Sprintf("refused: run %d may cancel only its own task (%s) and the tasks it enqueued; task %d is neither", hRun, hTask, bTask)
	wantStolen := fmt.Sprintf("refused: the run token is run %d's, but the request comes from a process of run %d", bRun, hRun)
	for _, c := range strings.Fields(out("heartbeat.codes")) {
		if c != "1" {
			t.Errorf("qd heartbeat of the victim's run exited %s, want 1: %s", c, out("heartbeat.err"))
			break
		}
	}
	if got := out("heartbeat.err"); !strings.Contains(got, wantProgress) {
		t.Errorf("qd heartbeat of the victim's run said %q, want %q", got, wantProgress)
	}
	if got := out("cancel.code"); got != "1" || !strings.Contains(out("cancel.out"), wantCancel) {
		t.Errorf("qd cancel of the victim's task: exit %s, %q; want 1 and %q", got, out("cancel.out"), wantCancel)
	}
	raws := map[string]string{
		"progress-none": wantProgress, "progress-forged": "matches no live run of this daemon", "progress-stolen": wantStolen,
		"cancel-none": wantCancel, "cancel-forged": "matches no live run of this daemon", "cancel-stolen": wantStolen,
	}
	if cgroups {
		// Out of its process group, the hostile process is still in its
		// run's cgroup.
		raws["cancel-setsid"], raws["progress-setsid"], raws["cancel-setsid-stolen"] = wantCancel, wantProgress, wantStolen
	}
	for name, want := range raws {
		// The first answers came while the victim lived (the later ones,
		// once it has ended, refuse its token as dead); all were refused.
		answers := strings.Split(out("raw."+name), "\n")
		if !strings.Contains(answers[0], want) {
			t.Errorf("raw request %s answered %q first, want %q", name, answers[0], want)
		}
		for _, a := range answers {
			if !strings.HasPrefix(a, "403 refused: ") {
				t.Errorf("raw request %s answered %q, want 403", name, a)
				break
			}
		}
	}

	// The victim: stopped by its stall_timeout while the hostile agent was
	// still at work, not cancelled.
	if got := out("victim.after"); got != "gone" {
		t.Errorf("the victim was %s after eight seconds of hostile heartbeats, past its 3s stall_timeout", got)
	}
	v := showRaw(t, qd, db, strconv.FormatInt(bTask, 10))
	if v.Task.State != "failed" || v.Task.CancelRequested || len(v.Runs) != 1 || v.Runs[0].State != "abandoned" ||
		!strings.Contains(v.Runs[0].Summary, "stalled: no output for 3s") {
		t.Errorf("victim: %+v; want failed, no cancel request, one run abandoned as stalled", v)
	} else if lived := v.Runs[0].FinishedAt.Sub(v.Runs[0].StartedAt); lived > 6*time.Second {
		t.Errorf("victim lived %s, past its 3s stall_timeout and 1s kill_grace: the hostile heartbeats counted", lived)
	}

	// What the hostile run may do to itself.
	if got := out("self.code"); got != "0" {
		t.Errorf("qd heartbeat of its own run: exit %s: %s", got, out("self.out"))
	}
	follow := out("follow")
	if got, want := out("follow.cancel"), "task "+follow+" cancelled\n0"; got != want {
		t.Errorf("qd cancel of its own follow-up: %q, want %q", got, want)
	}
	f := showRaw(t, qd, db, follow)
	if f.Task.State != "cancelled" || !f.Task.CancelRequested || f.Task.ParentRun != hRun {
		t.Errorf("follow-up %s: %+v; want cancelled, requested, parent_run %d", follow, f.Task, hRun)
	}

	// The daemon's log: every refusal with the peer's pid and run, and no
	// token.
	log := d.Log()
	if n := strings.Count(log, "socket request refused"); n < 10 {
		t.Errorf("the daemon logged %d refusals, want one for each refused request", n)
	}
	if !strings.Contains(log, fmt.Sprintf("peer_run=%d proved_by=token", hRun)) || !strings.Contains(log, "peer_pid=") {
		t.Errorf("the refusals are not logged with the hostile run %d and its pid", hRun)
	}
	if stolen := out("stolen"); len(stolen) < 20 || strings.Contains(log, stolen) {
		t.Errorf("stolen token %q: want a token, and none in the daemon's log", stolen)
	}

	// The operator: qd cancel and a raw cancel on the socket both stop the
	// run now and record the request.
	l1, l2 := enqueue(t, qd, db, "l", "long"), enqueue(t, qd, db, "l2", "long")
	for _, id := range []string{l1, l2} {
		readPID(t, filepath.Join(dir, "long."+id), 20*time.Second)
	}
	if got := testkit.MustQD(t, qd, db, "cancel", "--config", d.Config, l1); !strings.Contains(got, "stopped now by the daemon on this host") {
		t.Errorf("operator's qd cancel said %q", got)
	}
	id2, _ := strconv.ParseInt(l2, 10, 64)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := api.Client{Path: d.Socket}.CancelTask(ctx, id2)
	if err != nil || res.State != "running" || res.RunID == 0 {
		t.Errorf("operator's raw cancel of task %s: %+v, %v; want its run stopped", l2, res, err)
	}
	for _, id := range []string{l1, l2} {
		waitShow(t, qd, db, id, 15*time.Second, "cancelled", func(s shown) bool { return s.Task.State == "cancelled" })
		if s := showRaw(t, qd, db, id); !s.Task.CancelRequested || s.Runs[0].State != "cancelled" {
			t.Errorf("operator's cancel of task %s: %+v; want a recorded request and a cancelled run", id, s)
		}
	}
}

// shownFull is `qd show --json` with the fields the socket test reads.
type shownFull struct {
	Task struct {
		State           string `json:"state"`
		CancelRequested bool   `json:"cancel_requested"`
		ParentRun       int64  `json:"parent_run"`
	} `json:"task"`
	Runs []struct {
		State      string    `json:"state"`
		Summary    string    `json:"summary"`
		StartedAt  time.Time `json:"started_at"`
		FinishedAt time.Time `json:"finished_at"`
	} `json:"runs"`
}

func showRaw(t *testing.T, qd, db, id string) shownFull {
	t.Helper()
	var s shownFull
	if err := json.Unmarshal([]byte(testkit.MustQD(t, qd, db, "show", id, "--json")), &s); err != nil {
		t.Fatalf("qd show %s --json: %v", id, err)
	}
	return s
}
