package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// timedAgent runs the example $SCRIPT and records in $LOG, apart from qd,
// when each run started and ended (nanoseconds), and copies the file
// $QD_PARENT_RESULTS names, when there is one.
const timedAgent = `echo "start $QD_AGENT $QD_TASK_ID $(date +%s%N)" >> "$LOG"
if [ -n "${QD_PARENT_RESULTS:-}" ]; then cp "$QD_PARENT_RESULTS" "$OUT/parents.$QD_TASK_ID"; fi
"$SCRIPT"; rc=$?
echo "end $QD_AGENT $QD_TASK_ID $(date +%s%N)" >> "$LOG"
exit $rc
`

// chainShown is what `qd show --json` says of a task's chain and result.
type chainShown struct {
	Task struct {
		State       string          `json:"state"`
		LastSummary string          `json:"last_summary"`
		After       []int64         `json:"after"`
		Result      json.RawMessage `json:"result"`
	} `json:"task"`
	Parents []struct {
		ID    int64
		State string
	} `json:"parents"`
	Dependents []struct {
		ID    int64
		State string
	} `json:"dependents"`
}

func showChain(t *testing.T, qd, db string, id int64) chainShown {
	t.Helper()
	out := testkit.MustQD(t, qd, db, "show", strconv.FormatInt(id, 10), "--json")
	var s chainShown
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("qd show %d --json: %v\n%s", id, err, out)
	}
	return s
}

// Ensure the planner / workers / reducer example of docs/chains.md works
// as it says: the planner enqueues five workers and a reducer after them
// through its socket, the reducer starts only after the last worker ended
// (by a record kept apart from qd) and reads their five results, and its
// own result is what it made of them.
func TestChains_PlannerWorkersReducer(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	wrap := testkit.MustScript(t, dir, "timed.sh", timedAgent)
	log := filepath.Join(dir, "times")
	agent := func(name string, parallel int) string {
		script := filepath.Join(testkit.Root(), "examples", name+".sh")
		return fmt.Sprintf(`
agent %q {
  command  = [%q]
  schedule = "@every 1s"
  parallel = %d
  env = {
    PATH   = %q
    SCRIPT = %q
    LOG    = %q
    OUT    = %q
  }
}`, name, wrap, parallel, filepath.Dir(qd)+":/usr/bin:/bin", script, log, dir)
	}
	testkit.StartDaemon(t, qd, db, "chains", agent("planner", 1)+agent("worker", 5)+agent("reducer", 1), testkit.DaemonOptions{})
	testkit.MustQD(t, qd, db, "lane", "set", "work", "--max-running", "5")
	planner := enqueue(t, qd, db, "plan", "planner")
	waitShow(t, qd, db, planner, 60*time.Second, "the planner to finish", func(s shown) bool { return s.Task.State == "done" })

	var workers []int64
	var reducer int64
	testkit.Eventually(t, 60*time.Second, "the reducer to finish", func() bool {
		out := testkit.MustQD(t, qd, db, "tasks", "--json")
		var tasks []struct {
			ID    int64  `json:"id"`
			Agent string `json:"agent"`
			State string `json:"state"`
		}
		if err := json.Unmarshal([]byte(out), &tasks); err != nil {
			t.Fatalf("qd tasks --json: %v", err)
		}
		workers, reducer = nil, 0
		done := false
		for _, tk := range tasks {
			switch tk.Agent {
			case "worker":
				workers = append(workers, tk.ID)
			case "reducer":
				reducer, done = tk.ID, tk.State == "done" || tk.State == "failed" || tk.State == "cancelled"
			}
		}
		return done
	})
	sort.Slice(workers, func(i, j int) bool { return workers[i] < workers[j] })
	red := showChain(t, qd, db, reducer)
	if red.Task.State != "done" || len(workers) != 5 {
		t.Fatalf("reducer %d: %s (%q); %d workers, want done and 5", reducer, red.Task.State, red.Task.LastSummary, len(workers))
	}
	if got := string(red.Task.Result); !strings.Contains(got, `"parts": 5`) || !strings.Contains(got, `"sum": 55`) {
		t.Errorf("reducer's result: %s, want 5 parts summing to 55", got)
	}
	if len(red.Parents) != 5 || fmt.Sprint(red.Task.After) != fmt.Sprint(workers) {
		t.Errorf("reducer waits for %v (parents %+v), want the workers %v", red.Task.After, red.Parents, workers)
	}
	for _, p := range red.Parents {
		if p.State != "done" {
			t.Errorf("reducer's parent %d is %s, want done", p.ID, p.State)
		}
	}
	if w := showChain(t, qd, db, workers[0]); len(w.Dependents) != 1 || w.Dependents[0].ID != reducer {
		t.Errorf("worker %d: dependents %+v, want the reducer %d", workers[0], w.Dependents, reducer)
	}
	if out := testkit.MustQD(t, qd, db, "result", strconv.FormatInt(workers[2], 10)); !strings.Contains(out, `"square": 9`) {
		t.Errorf("qd result of worker %d: %s, want part 3's square", workers[2], out)
	}

	// The record kept apart from qd: every worker ended before the reducer
	// started.
	var lastEnd, reducerStart int64
	for _, line := range strings.Split(strings.TrimSpace(readFile(t, log)), "\n") {
		var what, agentName string
		var task, ns int64
		fmt.Sscan(line, &what, &agentName, &task, &ns)
		switch {
		case agentName == "worker" && what == "end":
			lastEnd = max(lastEnd, ns)
		case agentName == "reducer" && what == "start":
			reducerStart = ns
		}
	}
	if reducerStart == 0 || lastEnd == 0 || reducerStart < lastEnd {
		t.Errorf("reducer started at %d, the last worker ended at %d: it must start after", reducerStart, lastEnd)
	}
	var parents map[string]json.RawMessage
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, fmt.Sprint("parents.", reducer)))), &parents); err != nil || len(parents) != 5 {
		t.Errorf("$QD_PARENT_RESULTS of the reducer: %v, %v; want five results", parents, err)
	}
	if _, err := os.Stat(filepath.Join(dir, fmt.Sprint("parents.", workers[0]))); err == nil {
		t.Errorf("worker %d, which waited for nothing, was given $QD_PARENT_RESULTS", workers[0])
	}
}

// Ensure a worker that fails for good cancels the reducer waiting for it,
// naming it; a retry of the worker's chain brings both back, and the
// chain completes; and bad input is refused with exit 2 and one line,
// with nothing enqueued.
func TestChains_FailRetryAndBadInput(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	w := enqueue(t, qd, db, "w", "worker", "--max-attempts", "1")
	r := enqueue(t, qd, db, "r", "reducer", "--after", w)
	if s := showChain(t, qd, db, mustID(t, r)); s.Task.State != "waiting" {
		t.Fatalf("reducer after a queued worker is %s, want waiting", s.Task.State)
	}
	if _, _, code := testkit.QD(t, qd, db, "claim", "--lane", "r"); code != 3 {
		t.Errorf("claim in the reducer's lane while it waits: exit %d, want 3 (nothing to claim)", code)
	}
	claimAndEnd(t, qd, db, "w", "fail", "--summary", "upstream gone")
	s := showChain(t, qd, db, mustID(t, r))
	if want := "cancelled: task " + w + ", which it waited for, failed"; s.Task.State != "cancelled" || s.Task.LastSummary != want {
		t.Errorf("reducer after its worker failed: %s, %q; want cancelled, %q", s.Task.State, s.Task.LastSummary, want)
	}
	out := testkit.MustQD(t, qd, db, "retry", w, "--chain")
	if !strings.Contains(out, `"state": "queued"`) || !strings.Contains(out, `"state": "waiting"`) {
		t.Errorf("qd retry --chain: %s; want the worker queued and the reducer waiting", out)
	}
	claimAndEnd(t, qd, db, "w", "complete")
	claimAndEnd(t, qd, db, "r", "complete")
	if s := showChain(t, qd, db, mustID(t, r)); s.Task.State != "done" {
		t.Errorf("reducer after the retried chain: %s, want done", s.Task.State)
	}

	before := testkit.MustQD(t, qd, db, "tasks", "--json")
	many := make([]string, 1001)
	for i := range many {
		many[i] = w
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--after", "9999"}, "task 9999 does not exist"},
		{[]string{"--after", "x"}, `--after "x" is not a task id`},
		{[]string{"--after", strings.Join(many, ",")}, "at most 1000"},
		{[]string{"--after", w, "--after-any", w}, "cannot be used together"},
	} {
		args := append([]string{"enqueue", "--lane", "x", "--agent", "a"}, c.args...)
		_, stderr, code := testkit.QD(t, qd, db, args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("qd enqueue %s: exit %d, %q; want 2 and one line saying %q", strings.Join(c.args, " ")[:min(40, len(strings.Join(c.args, " ")))], code, stderr, c.want)
		}
	}
	if after := testkit.MustQD(t, qd, db, "tasks", "--json"); after != before {
		t.Errorf("refused enqueues changed the tasks:\n%s\nwant\n%s", after, before)
	}
	for _, args := range [][]string{{"results", "--parents"}, {"result", "-"}} {
		if _, stderr, code := testkit.QD(t, qd, db, args...); code != 2 || !strings.Contains(stderr, "only inside an agent") {
			t.Errorf("qd %s outside a run: exit %d, %q; want 2", strings.Join(args, " "), code, stderr)
		}
	}
}

func mustID(t *testing.T, s string) int64 {
	t.Helper()
	id, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("task id %q: %v", s, err)
	}
	return id
}

// claimAndEnd claims the one task of lane with `qd claim` and ends its run
// with `qd VERB RUN ARGS...`.
func claimAndEnd(t *testing.T, qd, db, lane, verb string, args ...string) {
	t.Helper()
	var l struct {
		RunID int64 `json:"run_id"`
	}
	out := testkit.MustQD(t, qd, db, "claim", "--lane", lane)
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("qd claim --lane %s: %v\n%s", lane, err, out)
	}
	testkit.MustQD(t, qd, db, append([]string{verb, strconv.FormatInt(l.RunID, 10)}, args...)...)
}

// Ensure the dashboard's task page draws the chain: the tasks it waits
// for and those waiting for it, each linked and with its state's colour,
// its result, and the same in its /api/ twin.
func TestChains_Dashboard(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	a := enqueue(t, qd, db, "da", "w")
	b := enqueue(t, qd, db, "db", "w")
	c := enqueue(t, qd, db, "dc", "w", "--after", a, "--after", b)
	var l struct {
		RunID int64 `json:"run_id"`
	}
	out := testkit.MustQD(t, qd, db, "claim", "--lane", "da")
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatal(err)
	}
	testkit.MustQD(t, qd, db, "complete", strconv.FormatInt(l.RunID, 10))
	enqueue(t, qd, db, "other", "w")
	claimAndEnd(t, qd, db, "other", "complete") // a run of no chain of c's

	addr := freePort(t)
	cmd := exec.Command(qd, "ui", "--listen", addr, "--read-only")
	cmd.Env = append(testkit.Environ(), "QD_DATABASE_URL="+db, "QD_CONFIG=/nonexistent/qd.hcl", "STATE_DIRECTORY="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		return resp.StatusCode, readAll(resp)
	}
	testkit.Eventually(t, 10*time.Second, "qd ui to answer", func() bool { c, _ := get("/api/overview"); return c == http.StatusOK })
	code, page := get("/tasks/" + c)
	if code != http.StatusOK {
		t.Fatalf("GET /tasks/%s: %d", c, code)
	}
	for _, want := range []string{
		`<span class="state waiting" id="task-state">waiting</span>`,
		`<a href="/tasks/` + a + `">task ` + a + `</a> <span class="state done">done</span>`,
		`<a href="/tasks/` + b + `">task ` + b + `</a> <span class="state queued">queued</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("task page of %s lacks %s", c, want)
		}
	}
	_, page = get("/tasks/" + a)
	if want := `<ul id="dependents">`; !strings.Contains(page, want) || !strings.Contains(page, `<a href="/tasks/`+c+`">task `+c+`</a> <span class="state waiting">waiting</span>`) {
		t.Errorf("task page of %s does not list %s waiting for it", a, c)
	}
	_, twin := get("/api/tasks/" + c)
	var p struct {
		Task struct {
			After []int64 `json:"after"`
		} `json:"task"`
		Parents []struct {
			ID    int64  `json:"id"`
			State string `json:"state"`
		} `json:"parents"`
	}
	if err := json.Unmarshal([]byte(twin), &p); err != nil || len(p.Parents) != 2 || len(p.Task.After) != 2 || p.Parents[0].State != "done" {
		t.Errorf("GET /api/tasks/%s: %v, %.600s; want its two parents, the first done", c, err, twin)
	}
	// The timeline filtered to c's chain draws the run of a, and not the
	// other lane's.
	code, body := get("/api/timeline?chain=" + c)
	var tl struct {
		Chain int64 `json:"chain"`
		Lanes []struct {
			Lane string `json:"lane"`
			Runs []struct {
				TaskID int64 `json:"task_id"`
			} `json:"runs"`
		} `json:"lanes"`
	}
	if err := json.Unmarshal([]byte(body), &tl); err != nil || code != http.StatusOK {
		t.Fatalf("GET /api/timeline?chain=%s: %d %v %.300s", c, code, err, body)
	}
	if len(tl.Lanes) != 1 || tl.Lanes[0].Lane != "da" || len(tl.Lanes[0].Runs) != 1 || fmt.Sprint(tl.Lanes[0].Runs[0].TaskID) != a {
		t.Errorf("timeline of the chain of %s: %.600s; want one lane, da, with the run of task %s", c, body, a)
	}
	if _, page := get("/tasks/" + c); !strings.Contains(page, `href="/timeline?chain=`+c+`"`) {
		t.Errorf("task page of %s does not link its chain's timeline", c)
	}
}

// Ensure an agent's result that is not JSON or past 1 MiB is refused
// with exit 2 and one line, the result it stores after is kept, an agent
// whose task waited for none reads an empty object of results, and a run
// may make a task wait for its own task but not for another's.
func TestChains_ResultBadInput(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	script := testkit.MustScript(t, dir, "agent.sh", `[ "$QD_LANE" = res ] || exit 0 # the task it enqueues does nothing
o=$OUT
echo '{' | qd result - 2> "$o/bad.err"; echo $? > "$o/bad.code"
head -c 1100000 /dev/zero | tr '\0' 'x' | sed 's/^/"/; s/$/"/' | qd result - 2> "$o/big.err"; echo $? > "$o/big.code"
qd results --parents > "$o/parents"; echo $? > "$o/parents.code"
qd enqueue --lane f --agent a --after "$OTHER" > "$o/foreign.out" 2> "$o/foreign.err"; echo $? > "$o/foreign.code"
qd enqueue --lane f --agent a --after "$QD_TASK_ID" > "$o/own.out" 2>&1; echo $? > "$o/own.code"
echo '{"kept": true}' | qd result -
`)
	other := enqueue(t, qd, db, "other", "nobody") // a task the agent did not enqueue
	testkit.StartDaemon(t, qd, db, "results", fmt.Sprintf(`
agent "a" {
  command  = [%q]
  schedule = "@every 1s"
  env = {
    PATH  = %q
    OUT   = %q
    OTHER = %q
  }
}`, script, filepath.Dir(qd)+":/usr/bin:/bin", dir, other), testkit.DaemonOptions{})
	id := enqueue(t, qd, db, "res", "a")
	waitShow(t, qd, db, id, 60*time.Second, "the agent to finish", func(s shown) bool { return s.Task.State == "done" })
	out := func(name string) string { return strings.TrimSpace(readFile(t, filepath.Join(dir, name))) }
	for _, c := range []struct{ name, want string }{{"bad", "result is not valid JSON"}, {"big", "more than the 1048576-byte limit"}} {
		if code, err := out(c.name+".code"), out(c.name+".err"); code != "2" || !strings.Contains(err, c.want) || strings.Contains(err, "\n") {
			t.Errorf("qd result - with a %s result: exit %s, %q; want 2 and one line saying %q", c.name, code, err, c.want)
		}
	}
	if code, got := out("parents.code"), out("parents"); code != "0" || got != "{}" {
		t.Errorf("qd results --parents of a task that waited for none: exit %s, %q; want 0 and {}", code, got)
	}
	if code, err := out("foreign.code"), out("foreign.err"); code != "1" || !strings.Contains(err, "may make a task wait only for its own task") {
		t.Errorf("qd enqueue --after a task the run did not enqueue: exit %s, %q; want 1, refused", code, err)
	}
	if code := out("own.code"); code != "0" {
		t.Errorf("qd enqueue --after the run's own task: exit %s, %s; want 0", code, out("own.out"))
	}
	if got := strings.TrimSpace(testkit.MustQD(t, qd, db, "result", id)); !strings.Contains(got, `"kept": true`) {
		t.Errorf("qd result %s: %s, want the result stored after the refused ones", id, got)
	}
}
