package ui_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/metrics"
	"github.com/qd-run/qd/ui"
)

const evil = `<script>alert("qd")</script>`

// Ensure every page and its JSON twin answer, show what the queue holds,
// and escape payloads, summaries and output that hold markup.
func TestUI_Pages(t *testing.T) {
	p, _ := MustProvider(t)
	payload, _ := json.Marshal(map[string]string{"html": evil})
	id := MustEnqueueJSON(t, p, "web", string(payload))
	MustEnqueueJSON(t, p, "web", `{"n":2}`)
	MustFinish(t, p, "web", lease.RunFailed, "failed: "+evil, "out "+evil+"\n")
	base := MustServer(t, p, ui.Options{})

	for _, path := range []string{"/", "/tasks", fmt.Sprintf("/tasks/%d", id), "/timeline", "/timeline?range=week",
		"/throughput", "/throughput?range=day", "/actions", "/tasks?lane=web&state=failed&text=ALERT"} {
		code, body := MustGet(t, base, path)
		if code != http.StatusOK {
			t.Errorf("GET %s: status %d: %s", path, code, body)
		}
		if strings.Contains(body, "<script>alert") {
			t.Errorf("GET %s: unescaped markup from the queue in the page", path)
		}
	}
	_, body := MustGet(t, base, fmt.Sprintf("/tasks/%d", id))
	for _, want := range []string{"&lt;script&gt;alert", "failed: &lt;script&gt;", "out &lt;script&gt;", "exit 3", "stored tail"} {
		if !strings.Contains(body, want) {
			t.Errorf("task page lacks %q", want)
		}
	}
	_, body = MustGet(t, base, "/tasks?lane=web&state=failed&text=ALERT")
	if !strings.Contains(body, fmt.Sprintf(`id="task-%d"`, id)) || !strings.Contains(body, "1 task matches") {
		t.Errorf("filtered listing lacks task %d or its count:\n%s", id, body)
	}
	for _, c := range []struct {
		path string
		into any
	}{
		{"/api/overview", &ui.Overview{}},
		{"/api/tasks?state=failed", &ui.TaskList{}},
		{fmt.Sprintf("/api/tasks/%d", id), &ui.TaskPage{}},
		{"/api/timeline?range=day", &ui.Timeline{}},
		{"/api/throughput", &ui.Throughput{}},
	} {
		code, body := MustGet(t, base, c.path)
		if code != http.StatusOK || json.Unmarshal([]byte(body), c.into) != nil {
			t.Errorf("GET %s: status %d, body %.300s", c.path, code, body)
		}
	}
	var tl ui.Timeline
	_, body = MustGet(t, base, "/api/timeline")
	_ = json.Unmarshal([]byte(body), &tl)
	if len(tl.Lanes) != 1 || len(tl.Lanes[0].Bars) != 1 {
		t.Errorf("timeline: got %+v, want lane web with one run", tl.Lanes)
	}
	if code, _ := MustGet(t, base, "/tasks/999999"); code != http.StatusNotFound {
		t.Errorf("unknown task: status %d, want 404", code)
	}
	if code, _ := MustGet(t, base, "/tasks/bogus"); code != http.StatusBadRequest {
		t.Errorf("task id that is no number: status %d, want 400", code)
	}
	if code, _ := MustGet(t, base, "/api/tasks?state=bogus"); code != http.StatusBadRequest {
		t.Errorf("bad state: status %d, want 400", code)
	}
	if code, _ := MustGet(t, base, "/metrics"); code != http.StatusNotFound {
		t.Errorf("/metrics with no handler: status %d, want 404", code)
	}
}

// MustEnqueueJSON enqueues a task of agent w in lane with payload.
func MustEnqueueJSON(tb testing.TB, p interface {
	Enqueue(context.Context, lease.EnqueueParams) (int64, bool, error)
}, lane, payload string) int64 {
	tb.Helper()
	id, _, err := p.Enqueue(context.Background(), lease.EnqueueParams{Lane: lane, Agent: "w", Payload: json.RawMessage(payload), MaxAttempts: 1})
	if err != nil {
		tb.Fatalf("enqueue: %v", err)
	}
	return id
}

func paused(tb testing.TB, p interface {
	Lanes(context.Context) ([]lease.Lane, error)
}, lane string) bool {
	tb.Helper()
	ls, err := p.Lanes(context.Background())
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range ls {
		if l.Name == lane {
			return l.Paused
		}
	}
	tb.Fatalf("no lane %s", lane)
	return false
}

func TestUI_Security(t *testing.T) {
	p, _ := MustProvider(t)
	MustEnqueueJSON(t, p, "sec", `{}`)
	base := MustServer(t, p, ui.Options{})
	t.Run("CrossOrigin", func(t *testing.T) {
		// Ensure a POST from another site is refused and changes nothing,
		// while the same POST from the dashboard's own page pauses the lane.
		code, _ := MustPost(t, base, "/actions/lanes/sec/pause", url.Values{}, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
		if code != http.StatusForbidden || paused(t, p, "sec") {
			t.Fatalf("cross-origin pause: status %d, paused %v; want 403 and not paused", code, paused(t, p, "sec"))
		}
		code, body := MustPost(t, base, "/actions/lanes/sec/pause", url.Values{}, "Origin", base, "Sec-Fetch-Site", "same-origin")
		if code != http.StatusOK || !paused(t, p, "sec") {
			t.Fatalf("same-origin pause: status %d (%s), paused %v", code, body, paused(t, p, "sec"))
		}
	})
	t.Run("NoGetChanges", func(t *testing.T) {
		// Ensure an action cannot be reached by GET.
		if code, _ := MustGet(t, base, "/actions/lanes/sec/resume"); code != http.StatusMethodNotAllowed {
			t.Errorf("GET of an action: status %d, want 405", code)
		}
		if !paused(t, p, "sec") {
			t.Error("a GET resumed the lane")
		}
	})
	t.Run("Host", func(t *testing.T) {
		// Ensure a request naming another host (a rebound DNS name) is
		// refused, and an allowed name is served.
		req, _ := http.NewRequest(http.MethodGet, base+"/api/overview", nil)
		req.Host = "evil.example:7780"
		if code, _ := MustDo(t, req); code != http.StatusMisdirectedRequest {
			t.Errorf("foreign Host: status %d, want 421", code)
		}
		allowed := MustServer(t, p, ui.Options{AllowedHosts: []string{"qd.internal"}})
		req, _ = http.NewRequest(http.MethodGet, allowed+"/api/overview", nil)
		req.Host = "qd.internal"
		if code, _ := MustDo(t, req); code != http.StatusOK {
			t.Errorf("allowed Host: status %d, want 200", code)
		}
	})
	t.Run("ReadOnly", func(t *testing.T) {
		// Ensure read-only mode hides the actions and refuses them.
		ro := MustServer(t, p, ui.Options{ReadOnly: true})
		_, body := MustGet(t, ro, "/")
		if strings.Contains(body, "/actions/lanes/") || !strings.Contains(body, "read-only") {
			t.Error("read-only overview shows lane actions or does not say it is read-only")
		}
		code, _ := MustPost(t, ro, "/actions/lanes/sec/resume", url.Values{}, "Sec-Fetch-Site", "same-origin")
		if code != http.StatusForbidden || !paused(t, p, "sec") {
			t.Errorf("read-only resume: status %d, want 403 and the lane still paused", code)
		}
	})
	t.Run("Token", func(t *testing.T) {
		// Ensure a token is asked of every request, and taken as a bearer
		// token, as basic auth's password, or once from ?token=.
		tok := MustServer(t, p, ui.Options{Token: "t0ken"})
		if code, _ := MustGet(t, tok, "/api/overview"); code != http.StatusUnauthorized {
			t.Errorf("no token: status %d, want 401", code)
		}
		if code, _ := MustGet(t, tok, "/api/overview", "Authorization", "Bearer t0ken"); code != http.StatusOK {
			t.Errorf("bearer: status %d", code)
		}
		req, _ := http.NewRequest(http.MethodGet, tok+"/api/overview", nil)
		req.SetBasicAuth("anyone", "t0ken")
		if code, _ := MustDo(t, req); code != http.StatusOK {
			t.Errorf("basic: status %d", code)
		}
		if code, _ := MustGet(t, tok, "/api/overview", "Authorization", "Bearer wrong"); code != http.StatusUnauthorized {
			t.Errorf("wrong token: status %d, want 401", code)
		}
		code, _ := MustGet(t, tok, "/?token=t0ken")
		if code != http.StatusSeeOther {
			t.Errorf("?token=: status %d, want a redirect setting the cookie", code)
		}
	})
	t.Run("Listen", func(t *testing.T) {
		// Ensure an address beyond loopback needs a token.
		for _, c := range []struct {
			listen, token string
			ok            bool
		}{
			{"127.0.0.1:7780", "", true}, {"[::1]:7780", "", true}, {"localhost:7780", "", true},
			{"0.0.0.0:7780", "", false}, {":7780", "", false}, {"192.0.2.1:7780", "", false}, {"0.0.0.0:7780", "t", true},
		} {
			err := ui.CheckListen(c.listen, c.token)
			if (err == nil) != c.ok || (err != nil && !errors.Is(err, ui.ErrNeedsToken)) {
				t.Errorf("CheckListen(%q, %q) = %v; want ok %v", c.listen, c.token, err, c.ok)
			}
		}
		if _, err := ui.New(ui.Options{Store: p, Listen: "0.0.0.0:7780"}); !errors.Is(err, ui.ErrNeedsToken) {
			t.Errorf("New on 0.0.0.0 without a token: %v", err)
		}
	})
}

// Ensure the database URL's password appears in no page, JSON or error,
// even when the database cannot be reached.
func TestUI_NoPassword(t *testing.T) {
	p, u := MustProvider(t)
	MustEnqueueJSON(t, p, "pw", `{}`)
	base := MustServer(t, p, ui.Options{})
	paths := []string{"/", "/tasks", "/tasks/1", "/timeline", "/throughput", "/actions",
		"/api/overview", "/api/tasks", "/api/tasks/1", "/api/timeline", "/api/throughput", "/tasks/bogus"}
	for _, path := range paths {
		if _, body := MustGet(t, base, path); strings.Contains(body, password) {
			t.Errorf("GET %s shows the database password", path)
		}
	}
	// A queue whose server is gone: every page fails, and says so without
	// the URL.
	down, _ := url.Parse(u)
	down.Host = "127.0.0.1:1"
	gone, err := openUnmigrated(down.String())
	if err != nil {
		t.Fatal(err)
	}
	dead := MustServer(t, gone, ui.Options{})
	for _, path := range paths {
		code, body := MustGet(t, dead, path)
		if strings.Contains(body, password) || strings.Contains(body, "127.0.0.1:1/") {
			t.Errorf("GET %s on a dead database shows its URL: %s", path, body)
		}
		if code == http.StatusOK && path != "/actions" && path != "/api/actions" {
			t.Errorf("GET %s on a dead database: status 200", path)
		}
	}
	code, body := MustPost(t, dead, "/actions/enqueue", url.Values{"agent": {"w"}}, "Sec-Fetch-Site", "same-origin")
	if code == http.StatusOK || strings.Contains(body, password) {
		t.Errorf("enqueue on a dead database: status %d, body %s", code, body)
	}
}

// Ensure a page's event stream pushes its live part again when the queue
// changes: a task enqueued after the stream opened shows up in it.
func TestUI_Stream(t *testing.T) {
	p, _ := MustProvider(t)
	base := MustServer(t, p, ui.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && sc.Text() != "" { // the first event: the page as it is
	}
	payload, _ := json.Marshal(map[string]string{"x": evil})
	id := MustEnqueueJSON(t, p, "live", string(payload))
	want := fmt.Sprintf(`id="task-%d"`, id)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "<script>alert") {
			t.Fatal("the stream carries unescaped markup")
		}
		if strings.HasPrefix(line, "data: ") && strings.Contains(line, want) {
			return
		}
	}
	t.Fatalf("task %d never appeared in the stream: %v", id, sc.Err())
}

// Ensure the bulk buttons say how many tasks they would change, and the
// confirmed action changes exactly those.
func TestUI_Bulk(t *testing.T) {
	p, _ := MustProvider(t)
	for range 4 {
		MustEnqueueJSON(t, p, "bulk", `{}`)
	}
	MustEnqueueJSON(t, p, "other", `{}`)
	for range 3 {
		MustFinish(t, p, "bulk", lease.RunFailed, "boom", "")
	}
	base := MustServer(t, p, ui.Options{})
	_, body := MustGet(t, base, "/tasks/confirm?action=retry&lane=bulk")
	if !strings.Contains(body, "Retry 3 failed or cancelled tasks") {
		t.Errorf("retry confirmation does not say 3:\n%s", body)
	}
	_, body = MustGet(t, base, "/tasks/confirm?action=retry&lane=bulk&state=failed")
	if !strings.Contains(body, "Retry 3 failed tasks") {
		t.Errorf("retry confirmation under a failed filter does not say failed alone:\n%s", body)
	}
	_, body = MustGet(t, base, "/tasks/confirm?action=cancel&lane=bulk")
	if !strings.Contains(body, "Cancel 1 queued or running task ") {
		t.Errorf("cancel confirmation does not say 1:\n%s", body)
	}
	code, body := MustPost(t, base, "/actions/bulk", url.Values{"action": {"retry"}, "lane": {"bulk"}}, "Sec-Fetch-Site", "same-origin")
	var res struct{ Count int64 }
	_ = json.Unmarshal([]byte(body), &res)
	if code != http.StatusOK || res.Count != 3 {
		t.Fatalf("bulk retry: status %d, %s", code, body)
	}
	n, _ := p.CountTasks(context.Background(), lease.TaskQuery{State: lease.TaskQueued})
	if n.N != 5 {
		t.Errorf("queued after bulk retry: %d, want 5", n.N)
	}
}

// Ensure the actions enqueue, cancel and retry as their forms say.
func TestUI_Actions(t *testing.T) {
	p, _ := MustProvider(t)
	base := MustServer(t, p, ui.Options{})
	same := []string{"Sec-Fetch-Site", "same-origin"}
	code, body := MustPost(t, base, "/actions/enqueue", url.Values{"agent": {"w"}, "lane": {"act"}, "payload": {`{"a":1}`},
		"priority": {"-2"}, "delay": {"1h"}}, same...)
	var res struct {
		TaskID int64 `json:"task_id"`
	}
	_ = json.Unmarshal([]byte(body), &res)
	if code != http.StatusOK || res.TaskID == 0 {
		t.Fatalf("enqueue: status %d, %s", code, body)
	}
	task, err := p.Task(context.Background(), res.TaskID)
	if err != nil || task.Priority != -2 || time.Until(task.RunAfter) < 50*time.Minute || string(task.Payload) != `{"a":1}` {
		t.Errorf("enqueued task: %+v, %v", task, err)
	}
	if code, body := MustPost(t, base, "/actions/enqueue", url.Values{"agent": {"w"}, "payload": {"not json"}}, same...); code != http.StatusBadRequest {
		t.Errorf("enqueue of bad JSON: status %d, %s", code, body)
	}
	if code, body := MustPost(t, base, fmt.Sprintf("/actions/tasks/%d/cancel", res.TaskID), nil, same...); code != http.StatusOK {
		t.Errorf("cancel: status %d, %s", code, body)
	}
	if code, body := MustPost(t, base, fmt.Sprintf("/actions/tasks/%d/retry", res.TaskID), nil, same...); code != http.StatusOK {
		t.Errorf("retry: status %d, %s", code, body)
	}
	if task, _ := p.Task(context.Background(), res.TaskID); task.State != lease.TaskQueued {
		t.Errorf("after cancel and retry: %s, want queued", task.State)
	}
	// A form posted without JavaScript goes back to the page it was on.
	req, _ := http.NewRequest(http.MethodPost, base+"/actions/lanes/act/pause", strings.NewReader("back=/tasks%3Flane%3Dact"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if code, _ := MustDo(t, req); code != http.StatusSeeOther {
		t.Errorf("plain form post: status %d, want 303", code)
	}
}

// Ensure the vendored files are those recorded, byte for byte, and that
// no other library crept in.
func TestVendor_Checksums(t *testing.T) {
	doc, err := os.ReadFile("static/VENDOR.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\| (\S+\.js) \| (\S+) \| (\S+) \| ([0-9a-f]{64}) \|`)
	rows := row.FindAllStringSubmatch(string(doc), -1)
	if len(rows) != 2 {
		t.Fatalf("VENDOR.md lists %d files, want htmx and uPlot", len(rows))
	}
	listed := map[string]bool{"qd.js": true}
	for _, r := range rows {
		b, err := os.ReadFile(filepath.Join("static", r[1]))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if got := hex.EncodeToString(sum[:]); got != r[4] {
			t.Errorf("%s (%s %s): sha256 %s, VENDOR.md says %s", r[1], r[2], r[3], got, r[4])
		}
		if !strings.Contains(string(b[:min(len(b), 200)]), r[3]) && r[2] == "uplot" {
			t.Errorf("%s does not say it is version %s", r[1], r[3])
		}
		listed[r[1]] = true
	}
	js, _ := filepath.Glob("static/*.js")
	for _, f := range js {
		if !listed[filepath.Base(f)] {
			t.Errorf("%s is not recorded in VENDOR.md", f)
		}
	}
}

// Ensure /metrics serves the handler it is given: the queue's lane gauges.
func TestUI_Metrics(t *testing.T) {
	p, _ := MustProvider(t)
	MustEnqueueJSON(t, p, "m", `{}`)
	base := MustServer(t, p, ui.Options{Metrics: metrics.ForQueue(p, "test")})
	code, body := MustGet(t, base, "/metrics")
	if code != http.StatusOK || !strings.Contains(body, `qd_lane_queued_tasks{lane="m"} 1`) {
		t.Errorf("GET /metrics: status %d:\n%.2000s", code, body)
	}
}

// Ensure a running attempt's output is read from its log file on this host
// and follows as the file grows, pushed over the task page's stream.
func TestUI_OutputFollows(t *testing.T) {
	p, _ := MustProvider(t)
	id := MustEnqueueJSON(t, p, "out", `{}`)
	l, err := p.Claim(context.Background(), lease.ClaimParams{Lanes: []string{"out"}, Owner: "here"})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	logPath := func(stateDir string, runID int64) string {
		return filepath.Join(stateDir, fmt.Sprintf("%d.log", runID))
	}
	if err := os.WriteFile(logPath(dir, l.RunID), []byte("first line "+evil+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	base := MustServer(t, p, ui.Options{LogPath: logPath, Hostname: host, Daemons: func(context.Context) ([]ui.Daemon, error) {
		return []ui.Daemon{{Name: "here", Host: host, StateDir: dir}}, nil
	}})
	_, body := MustGet(t, base, fmt.Sprintf("/tasks/%d", id))
	if !strings.Contains(body, "first line &lt;script&gt;") || !strings.Contains(body, "log file, following") {
		t.Fatalf("task page does not show the log file's output, escaped:\n%s", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/tasks/%d", base, id), nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() && sc.Text() != "" {
	}
	f, err := os.OpenFile(logPath(dir, l.RunID), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("second line\n")
	f.Close()
	for sc.Scan() {
		if strings.Contains(sc.Text(), "second line") {
			return
		}
	}
	t.Fatalf("the appended output never reached the stream: %v", sc.Err())
}

// Ensure a task's page links the task whose run enqueued it, and says so
// in its JSON.
func TestUI_TaskLinksItsParent(t *testing.T) {
	p, _ := MustProvider(t)
	ctx := context.Background()
	parent := MustEnqueueJSON(t, p, "fan", `{}`)
	l, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"fan"}, Owner: "d"})
	if err != nil {
		t.Fatal(err)
	}
	child, _, err := p.Enqueue(ctx, lease.EnqueueParams{Lane: "part", Agent: "w", ParentRun: l.RunID})
	if err != nil {
		t.Fatal(err)
	}
	base := MustServer(t, p, ui.Options{})
	_, body := MustGet(t, base, fmt.Sprintf("/tasks/%d", child))
	if want := fmt.Sprintf(`run %d of <a href="/tasks/%d">task %d</a>`, l.RunID, parent, parent); !strings.Contains(body, want) {
		t.Errorf("task page does not link its parent (want %q):\n%s", want, body)
	}
	_, js := MustGet(t, base, fmt.Sprintf("/api/tasks/%d", child))
	var page struct {
		ParentTask *int64 `json:"parent_task"`
	}
	if err := json.Unmarshal([]byte(js), &page); err != nil || page.ParentTask == nil || *page.ParentTask != parent {
		t.Errorf("/api/tasks/%d parent_task = %v (%v), want %d", child, page.ParentTask, err, parent)
	}
}

// Ensure the overview shows each rate limit with its units and each budget
// with a bar of spent over max and when a spent one resumes.
func TestUI_OverviewSpending(t *testing.T) {
	p, _ := MustProvider(t)
	ctx := context.Background()
	burst, max := 2, 0.0
	if _, err := p.SetLimit(ctx, lease.LimitUpdate{Name: "llm-api", Rate: 60, Per: time.Minute, Burst: &burst, Agents: []string{"w"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SetBudget(ctx, lease.BudgetUpdate{Name: "llm-daily", Max: &max, Period: "1d", Agents: []string{"w"}}); err != nil {
		t.Fatal(err)
	}
	base := MustServer(t, p, ui.Options{})
	_, body := MustGet(t, base, "/")
	for _, want := range []string{`id="limit-llm-api"`, "<td>60/1m</td><td>2</td><td>3</td>", `id="budget-llm-daily"`,
		"0.00 of 0.00", "<meter", "spent; resumes "} {
		if !strings.Contains(body, want) {
			t.Errorf("overview lacks %q", want)
		}
	}
	var o ui.Overview
	_, body = MustGet(t, base, "/api/overview")
	if err := json.Unmarshal([]byte(body), &o); err != nil || len(o.Limits) != 1 || len(o.Budgets) != 1 || !o.Budgets[0].Exhausted {
		t.Errorf("/api/overview limits %+v, budgets %+v (%v); want one of each, the budget spent", o.Limits, o.Budgets, err)
	}
}
