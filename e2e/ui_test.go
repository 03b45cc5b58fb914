package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/qd-run/qd/internal/testkit"
)

// browser finds Chromium. Without one the browser test skips, except
// under CI, where it must run.
func browser(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium binary: the browser test must run under CI (.ci/run installs it)")
	}
	t.Skip("no chromium binary (apt-get install chromium)")
	return ""
}

func freePort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// consoleErrors collects what a page logs as an error: console.error,
// uncaught exceptions, and the browser's own entries (failed loads, CSP
// refusals), while on.
type consoleErrors struct {
	mu   sync.Mutex
	list []string
	on   bool
}

func (c *consoleErrors) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.list
	c.list = nil
	return out
}

func (c *consoleErrors) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on = false
}

// listen reads the tab's console until ctx ends.
func (c *consoleErrors) listen(ctx context.Context) {
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				c.mu.Lock()
				if c.on {
					c.list = append(c.list, fmt.Sprintf("%s (%s)", m, m.URL))
				}
				c.mu.Unlock()
			}
		}
	}()
}

// Ensure the dashboard a daemon serves from its ui block works in a real
// browser: every page renders without a console error, a task enqueued
// meanwhile appears on the overview without a reload, the pause button
// pauses the lane in the database, the timeline draws one bar per run, and
// a POST from another origin is refused. Each page's screenshot is written
// under the test's temporary directory (and to $QD_UI_SCREENSHOTS, when
// set, for the README).
func TestUI_Browser(t *testing.T) {
	chrome := browser(t)
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	build := testkit.MustScript(t, dir, "build.sh", `read -r payload
echo "building: $payload"
sleep 0.$((QD_TASK_ID % 7 + 2))
case "$payload" in *fail*) echo "tests failed" >&2; exit 1;; esac
echo "ok"
`)
	deploy := testkit.MustScript(t, dir, "deploy.sh", "read -r payload\necho \"deploying $payload\"\nsleep 1\n")
	long := testkit.MustScript(t, dir, "report.sh", "echo 'collecting'\nexec sleep 300\n")
	addr := freePort(t)
	daemon := testkit.StartDaemon(t, qd, db, "ci-1", fmt.Sprintf(`
agent "build" {
  command  = [%q]
  schedule = "@every 1s"
  lanes    = ["build"]
  parallel = 2
  max_attempts = 1
}
agent "deploy" {
  command  = [%q]
  schedule = "@every 2s"
  lanes    = ["deploy"]
}
agent "report" {
  command  = [%q]
  schedule = "@every 1s"
  lanes    = ["reports"]
}
periodic "nightly-report" {
  schedule = "0 3 * * *"
  agent    = "report"
  lane     = "reports"
}
lane "build" {
  max_running = 2
}
ui {
  listen = %q
}`, build, deploy, long, addr), testkit.DaemonOptions{})
	t.Cleanup(func() { // a drain stops the long run's process group
		daemon.Signal(syscall.SIGTERM)
		daemon.Wait(t, 40*time.Second)
	})
	base := "http://" + addr
	for i := range 14 {
		payload := fmt.Sprintf(`{"commit":"%07x"}`, 0xa1b2c3+i*4099)
		if i%5 == 3 {
			payload = fmt.Sprintf(`{"commit":"%07x","note":"fail <script>alert(1)</script>"}`, 0xa1b2c3+i*4099)
		}
		testkit.MustQD(t, qd, db, "enqueue", "--lane", "build", "--agent", "build", "--max-attempts", "1", payload)
	}
	for i := range 3 {
		testkit.MustQD(t, qd, db, "enqueue", "--lane", "deploy", "--agent", "deploy", fmt.Sprintf(`{"env":"staging-%d"}`, i))
	}
	testkit.MustQD(t, qd, db, "enqueue", "--lane", "reports", "--agent", "report", `{"report":"weekly"}`)
	testkit.MustQD(t, qd, db, "enqueue", "--lane", "reports", "--agent", "report", `{"report":"daily"}`)
	pool := testkit.MustPool(t)
	u, _ := url.Parse(db)
	schema := u.Query().Get("schema")
	countRuns := func(where string) int {
		var n int
		if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT count(*) FROM %s.runs r WHERE %s`, schema, where)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	testkit.Eventually(t, 60*time.Second, "the build and deploy tasks to finish", func() bool {
		return countRuns(`r.state <> 'running'`) >= 17
	})

	ctx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.WindowSize(1280, 900), chromedp.Flag("lang", "en-US"))...)
	defer cancel()
	ctx, cancel = chromedp.NewContext(ctx)
	defer cancel()
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	errs := &consoleErrors{on: true}
	errs.listen(ctx)
	// do runs steps with a deadline of their own; the browser lives on.
	do := func(steps ...chromedp.Action[chromedp.Void]) error {
		sctx, stop := context.WithTimeout(ctx, 30*time.Second)
		defer stop()
		return chromedp.Do(sctx, steps...)
	}
	eval := func(expr string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[string](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	shots := t.TempDir()
	shot := func(name string) {
		t.Helper()
		_ = do(chromedp.Sleep(300 * time.Millisecond))
		png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatalf("screenshot %s: %v", name, err)
		}
		path := filepath.Join(shots, name+".png")
		if err := os.WriteFile(path, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot of the %s page: %s", name, path)
		if out := os.Getenv("QD_UI_SCREENSHOTS"); out != "" {
			if err := os.WriteFile(filepath.Join(out, "ui-"+name+".png"), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, e := range errs.take() {
			t.Errorf("%s page: %s", name, e)
		}
	}

	t.Run("Overview", func(t *testing.T) {
		// The page is live: a task enqueued now shows up without a reload.
		if err := do(chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#lanes")),
			chromedp.WaitVisible(chromedp.CSS("#conn.on"))); err != nil {
			t.Fatal(err)
		}
		// The console is heard: a probe error is caught, then set aside.
		eval(`console.error("console probe"), "probed"`)
		testkit.Eventually(t, 5*time.Second, "the console probe to be heard", func() bool {
			errs.mu.Lock()
			defer errs.mu.Unlock()
			return len(errs.list) > 0 && strings.Contains(errs.list[len(errs.list)-1], "console probe")
		})
		errs.mu.Lock()
		errs.list = errs.list[:len(errs.list)-1]
		errs.mu.Unlock()
		eval(`window.qdMarker = "same page"`)
		id := strings.TrimSpace(testkit.MustQD(t, qd, db, "enqueue", "--lane", "deploy", "--agent", "deploy", "--in", "1h", `{"env":"production"}`))
		if err := do(chromedp.WaitVisible(chromedp.CSS("#task-" + id))); err != nil {
			t.Fatalf("task %s never appeared on the overview: %v", id, err)
		}
		if live := eval(`window.qdMarker || "reloaded"`); live != "same page" {
			t.Errorf("the page reloaded to show task %s", id)
		}
		if err := do(chromedp.WaitVisible(chromedp.CSS("#runs")), chromedp.WaitVisible(chromedp.CSS("#agents"))); err != nil {
			t.Fatal(err)
		}
		shot("overview")
	})
	t.Run("Pause", func(t *testing.T) {
		// The pause button pauses the lane in the database.
		if err := do(chromedp.Click(chromedp.CSS("#lane-deploy button.pause")),
			chromedp.WaitVisible(chromedp.CSS("#flash .flash")), chromedp.WaitVisible(chromedp.CSS("#lane-deploy button.resume"))); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 5*time.Second, "lane deploy paused in the database", func() bool {
			var paused bool
			_ = pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT paused FROM %s.lanes WHERE name = 'deploy'`, schema)).Scan(&paused)
			return paused
		})
	})
	t.Run("PauseAgent", func(t *testing.T) {
		// The agent's pause button stops its claims in every lane: a task
		// enqueued for it waits; Resume lets it run.
		if err := do(chromedp.Click(chromedp.CSS("#agent-build-ci-1 button.pause")),
			chromedp.WaitVisible(chromedp.CSS("#flash .flash")), chromedp.WaitVisible(chromedp.CSS("#agent-build-ci-1 button.resume"))); err != nil {
			t.Fatal(err)
		}
		var by string
		if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT set_by FROM %s.agent_pauses WHERE agent = 'build'`, schema)).Scan(&by); err != nil || by != "qd ui" {
			t.Fatalf("agent build's pause in the database: set by %q, %v", by, err)
		}
		id := testkit.MustQD(t, qd, db, "enqueue", "--lane", "build", "--agent", "build", `"while paused"`)
		time.Sleep(3 * time.Second) // three ticks of the agent
		state := func() string {
			var st string
			_ = pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT state FROM %s.tasks WHERE id = $1`, schema), id).Scan(&st)
			return st
		}
		if st := state(); st != "queued" {
			t.Fatalf("task %s of the paused agent is %s, want still queued", id, st)
		}
		if err := do(chromedp.Click(chromedp.CSS("#agent-build-ci-1 button.resume")),
			chromedp.WaitVisible(chromedp.CSS("#agent-build-ci-1 button.pause"))); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 10*time.Second, "the resumed agent's task claimed", func() bool { return state() != "queued" })
	})
	t.Run("Timeline", func(t *testing.T) {
		// One bar per run of the last hour.
		if err := do(chromedp.Navigate(base+"/timeline?range=hour"), chromedp.WaitVisible(chromedp.CSS("svg.timeline")),
			chromedp.Sleep(time.Second)); err != nil {
			t.Fatal(err)
		}
		want := countRuns(`r.started_at > now() - interval '1 hour'`)
		bars, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("svg.timeline rect.run").length`))
		if err != nil {
			t.Fatal(err)
		}
		if bars != want || bars == 0 {
			t.Errorf("timeline draws %d bars, the queue has %d runs", bars, want)
		}
		// The picture: zoomed to the span the runs took.
		var first time.Time
		if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT min(started_at) FROM %s.runs`, schema)).Scan(&first); err != nil {
			t.Fatal(err)
		}
		zoom := fmt.Sprintf("/timeline?from=%d&to=%d", first.Add(-3*time.Second).UnixMilli(), time.Now().Add(3*time.Second).UnixMilli())
		if err := do(chromedp.Navigate(base+zoom), chromedp.WaitVisible(chromedp.CSS("svg.timeline rect.run"))); err != nil {
			t.Fatal(err)
		}
		shot("timeline")
	})
	t.Run("Pages", func(t *testing.T) {
		// The other pages render, the throughput charts drawn, and markup
		// in a payload stays text.
		if err := do(chromedp.Navigate(base+"/tasks?state=failed"), chromedp.WaitVisible(chromedp.CSS("#tasks"))); err != nil {
			t.Fatal(err)
		}
		failed, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS("#tasks tbody tr a"), "href"))
		if err != nil || !failed.Exists {
			t.Fatalf("no failed task listed: %v", err)
		}
		shot("tasks")
		if err := do(chromedp.Navigate(base+failed.Value), chromedp.WaitVisible(chromedp.CSS("#payload"))); err != nil {
			t.Fatal(err)
		}
		// Read as the live part is swapped in again: the text of whichever
		// #payload is in the page.
		pctx, stop := context.WithTimeout(ctx, 10*time.Second)
		_, err = chromedp.Run(pctx, chromedp.Poll[chromedp.Void](
			`(document.querySelector("#payload") || {textContent: ""}).textContent.includes("<script>alert(1)</script>")`))
		stop()
		if err != nil {
			t.Errorf("the payload's markup is not shown as text: %v", err)
		}
		if n := eval(`String(document.querySelectorAll("#payload script, .payload script").length)`); n != "0" {
			t.Errorf("the payload's markup became %s script elements", n)
		}
		shot("task")
		if err := do(chromedp.Navigate(base+"/throughput"), chromedp.WaitVisible(chromedp.CSS("#chart-finished .uplot")),
			chromedp.WaitVisible(chromedp.CSS("#chart-wait .uplot"))); err != nil {
			t.Fatal(err)
		}
		shot("throughput")
		if err := do(chromedp.Navigate(base+"/actions"), chromedp.WaitVisible(chromedp.CSS("#enqueue"))); err != nil {
			t.Fatal(err)
		}
		shot("actions")
	})
	t.Run("CrossOrigin", func(t *testing.T) {
		// A page of another origin posts to the dashboard: refused, and the
		// lane stays paused.
		errs.stop() // the other site's request is expected to fail
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, `<!doctype html><title>other</title><script>
fetch(%q, {method: "POST", mode: "no-cors", body: new URLSearchParams("back=/")})
  .then(function () { document.title = "sent"; }, function () { document.title = "sent"; });
</script>`, base+"/actions/lanes/deploy/resume")
		}))
		defer other.Close()
		if err := do(chromedp.Navigate(other.URL), chromedp.Poll[chromedp.Void](`document.title === "sent"`)); err != nil {
			t.Fatal(err)
		}
		time.Sleep(500 * time.Millisecond)
		var paused bool
		_ = pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT paused FROM %s.lanes WHERE name = 'deploy'`, schema)).Scan(&paused)
		if !paused {
			t.Error("a POST from another origin resumed the lane")
		}
	})
}

// Ensure `qd ui` serves the pages and the queue's metrics on its own, and
// refuses an address beyond loopback without a token, naming the flag.
func TestUI_Command(t *testing.T) {
	qd, db := testkit.MustQueue(t)
	testkit.MustQD(t, qd, db, "enqueue", "--lane", "cmd", "--agent", "w", `{}`)
	_, stderr, code := testkit.QDWithin(t, 10*time.Second, qd, db, "ui", "--listen", "0.0.0.0:7799")
	if code != 2 || !strings.Contains(stderr, "--token") {
		t.Errorf("qd ui on 0.0.0.0 without a token: exit %d, stderr %q; want 2 naming --token", code, stderr)
	}
	addr := freePort(t)
	cmd := exec.Command(qd, "ui", "--listen", addr, "--read-only")
	state := t.TempDir()
	cmd.Env = append(testkit.Environ(), "QD_DATABASE_URL="+db, "QD_CONFIG=/nonexistent/qd.hcl", "STATE_DIRECTORY="+state)
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
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
	if c, body := get("/api/tasks?lane=cmd"); c != http.StatusOK || !strings.Contains(body, `"lane": "cmd"`) {
		t.Errorf("GET /api/tasks: %d %s", c, body)
	}
	if c, body := get("/metrics"); c != http.StatusOK || !strings.Contains(body, `qd_lane_queued_tasks{lane="cmd"} 1`) {
		t.Errorf("GET /metrics: %d %.500s", c, body)
	}
	if !strings.Contains(out.String(), "serving http://"+addr+"/ (its token is in "+state+"/ui-token)") {
		t.Errorf("qd ui did not say where it serves and where its token is: %s", out.String())
	}
	// SIGINT stops it, though a page's live stream is open.
	req, _ := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Error("qd ui did not stop on SIGINT")
	}
}

func readAll(resp *http.Response) string {
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			return b.String()
		}
	}
}
