package faults

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// The dashboard a daemon serves from its ui block, under attack: another
// local user, a flood of heavy live pages, clients that trickle. Each
// scenario runs real children under short leases meanwhile and ends with
// the suite's checks: no task lost or duplicated, no healthy child killed.

// pageDaemon starts a daemon with a ui block on a free loopback port, an
// agent "w" running 4 children at once in lane work under leases of
// lease, and returns it with the dashboard's base URL.
func (r *rig) pageDaemon(name, lease string) (*testkit.Daemon, string) {
	r.t.Helper()
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(r.t))
	body := r.agentHCL(agentConf{name: "w", parallel: 4, lease: lease, heartbeat: "1s", env: map[string]string{"FA_TICK_MS": "500"}}) +
		fmt.Sprintf("lane \"work\" {\n  max_running = 4\n}\nui {\n  listen = %q\n}\n", addr)
	d := r.daemon(name, body, testkit.DaemonOptions{})
	base := "http://" + addr
	testkit.Eventually(r.t, 10*time.Second, "the dashboard to answer", func() bool {
		resp, err := http.Get(base + "/static/qd.css")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	return d, base
}

// daemonMetrics reads the daemon's metrics from its socket.
func daemonMetrics(t *testing.T, d *testkit.Daemon) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := api.Client{Path: d.Socket}.Metrics(ctx)
	if err != nil {
		t.Fatalf("metrics of %s: %v", d.Name, err)
	}
	return string(b)
}

// metricSum adds up the samples of the series whose line starts with
// prefix.
func metricSum(text, prefix string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// checkLeasePath fails the test when the daemon's metrics show a failed
// claim or heartbeat, a child it killed, or a claim slower than a second.
func checkLeasePath(t *testing.T, d *testkit.Daemon) {
	t.Helper()
	m := daemonMetrics(t, d)
	if n := metricSum(m, `qd_database_errors_total{reason="heartbeat"}`) + metricSum(m, `qd_database_errors_total{reason="claim"}`); n > 0 {
		t.Errorf("%v claims or heartbeats failed", n)
	}
	if n := metricSum(m, "qd_run_kills_total{"); n > 0 {
		t.Errorf("the daemon killed %v children", n)
	}
	all, quick := metricSum(m, "qd_claim_duration_seconds_count{"), metricSum(m, `qd_claim_duration_seconds_bucket{agent="w",le="1"}`)
	if all == 0 || quick < all {
		t.Errorf("claims: %v of %v took under a second", quick, all)
	}
	t.Logf("claims: %v, all under a second: %v", all, quick == all)
	for _, bad := range []string{"acquire connection", "lease lost", "given back"} {
		if strings.Contains(d.Log(), bad) {
			t.Errorf("the daemon logged %q", bad)
		}
	}
}

// curlAs sends a request with curl as user uid and returns its status.
func curlAs(t *testing.T, uid int, args ...string) int {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no curl (.ci/run installs it)")
		}
		t.Skip("no curl")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}"}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %v: %v", args, err)
	}
	code, _ := strconv.Atoi(string(out))
	return code
}

// Ensure another local user cannot drive the daemon's tokenless dashboard:
// as user nobody, enqueuing its own payload, pausing the lane, cancelling
// the running task, a bulk cancel and every page are refused 403, nothing
// changes in the queue, and the children run on undisturbed.
func TestUI_ForeignLocalUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to act as user nobody")
	}
	r := newRig(t)
	var ids []int64
	for range 6 {
		ids = append(ids, r.enqueue("work", "w", `{"ms":3000}`, 1))
	}
	d, base := r.pageDaemon("foreign", "4s")
	r.waitEvent("start", ids[0], 20*time.Second)
	same := []string{"-H", "Sec-Fetch-Site: same-origin", "-H", "Accept: application/json"}
	attempts := [][]string{
		append(append([]string{}, same...), "-d", `agent=w&lane=work&payload={"mode":"env"}`, base+"/actions/enqueue"),
		append(append([]string{}, same...), "-d", `agent=w&lane=work`, base+"/actions/run-now"),
		append(append([]string{}, same...), "-X", "POST", base+"/actions/lanes/work/pause"),
		append(append([]string{}, same...), "-X", "POST", fmt.Sprintf("%s/actions/tasks/%d/cancel", base, ids[0])),
		append(append([]string{}, same...), "-d", "action=cancel&lane=work", base+"/actions/bulk"),
		{base + "/"}, {base + "/api/tasks"}, {fmt.Sprintf("%s/api/tasks/%d", base, ids[0])}, {base + "/metrics"},
	}
	for _, a := range attempts {
		if code := curlAs(t, 65534, a...); code != http.StatusForbidden {
			t.Errorf("as nobody, %v: status %d, want 403", a, code)
		}
	}
	fig.fault("foreign-local-user", len(attempts))
	var changed int
	r.scalar(&changed, `SELECT (SELECT count(*) FROM {s}.tasks WHERE cancel_requested OR payload_text NOT LIKE '{"ms":3000}')
		+ (SELECT count(*) FROM {s}.lanes WHERE paused)`)
	if changed != 0 {
		t.Errorf("requests of user nobody changed %d rows of the queue", changed)
	}
	if !strings.Contains(d.Log(), "token_file="+d.StateDir+"/ui-token") {
		t.Errorf("the daemon's log does not name the token file")
	}
	tok, err := os.ReadFile(d.StateDir + "/ui-token")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(d.Log(), strings.TrimSpace(string(tok))) {
		t.Errorf("the daemon logged the dashboard's token")
	}
	if fi, err := os.Stat(d.StateDir + "/ui-token"); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if code := curlAs(t, 65534, "-H", "Authorization: Bearer "+strings.TrimSpace(string(tok)), base+"/api/overview"); code != http.StatusOK {
		t.Errorf("as nobody with the token from the file: status %d, want 200", code)
	}
	r.verify(expect{})
	checkLeasePath(t, d)
}

// Ensure a flood of live streams of the heaviest page (a payload search
// that reads 100,000 tasks at each push) on a daemon's dashboard takes
// nothing from its lease path: no heartbeat or claim fails, no child is
// killed, every claim takes under a second, and no more streams than the
// cap are served at once, the others answered 503 with a Retry-After.
func TestUI_PageFlood(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.exec(`INSERT INTO ` + r.schema + `.lanes (name) VALUES ('history')`)
	r.exec(`INSERT INTO ` + r.schema + `.tasks (lane, agent, payload, payload_text, max_attempts, state, finished_at)
		SELECT 'history', 'old', '{}', '{"n":' || g || ',"pad":"` + strings.Repeat("p", 300) + `"}', 1, 'done', clock_timestamp()
		FROM generate_series(1, 120000) g`)
	r.exec(`VACUUM (ANALYZE) ` + r.schema + `.tasks`)
	var ids []int64
	for range 12 {
		ids = append(ids, r.enqueue("work", "w", `{"ms":6000}`, 1))
	}
	d, base := r.pageDaemon("flood", "3s")
	r.waitEvent("start", ids[0], 20*time.Second)

	const streams = 120
	var served, maxServed, refused, noRetryAfter atomic.Int64
	var refusedClients atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := range streams {
		wg.Go(func() {
			wasRefused := false
			for {
				ctx, cancel := context.WithCancel(context.Background())
				go func() { <-stop; cancel() }()
				req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/tasks?text=nothing-matches-%d", base, i), nil)
				req.Header.Set("Accept", "text/event-stream")
				if resp, err := http.DefaultClient.Do(req); err == nil {
					switch resp.StatusCode {
					case http.StatusOK:
						n := served.Add(1)
						for m := maxServed.Load(); n > m && !maxServed.CompareAndSwap(m, n); m = maxServed.Load() {
						}
						sc := bufio.NewScanner(resp.Body)
						for sc.Scan() { // read the pushes until the test ends
						}
						served.Add(-1)
					case http.StatusServiceUnavailable:
						refused.Add(1)
						if !wasRefused {
							wasRefused = true
							refusedClients.Add(1)
						}
						if resp.Header.Get("Retry-After") == "" {
							noRetryAfter.Add(1)
						}
					}
					resp.Body.Close()
				}
				cancel()
				select {
				case <-stop:
					return
				case <-time.After(500 * time.Millisecond): // a refused stream comes back, as a reload would
				}
			}
		})
	}
	fig.fault("page-flood", streams)
	testkit.Eventually(t, 2*time.Minute, "the tasks of lane work to finish under the flood", func() bool {
		var left int
		r.scalar(&left, `SELECT count(*) FROM {s}.tasks WHERE lane = 'work' AND state IN ('queued', 'running')`)
		return left == 0
	})
	close(stop)
	wg.Wait()
	t.Logf("live streams: at most %d served at once; %d clients refused, %d refusals with 503", maxServed.Load(), refusedClients.Load(), refused.Load())
	if maxServed.Load() == 0 || maxServed.Load() > 32 || refusedClients.Load() < streams-32 || noRetryAfter.Load() != 0 {
		t.Errorf("streams: at most %d served at once, %d clients refused, %d refusals without Retry-After; want 1 to 32 served and at least %d refused, each with Retry-After",
			maxServed.Load(), refusedClients.Load(), noRetryAfter.Load(), streams-32)
	}
	r.exec(`DELETE FROM ` + r.schema + `.tasks WHERE lane = 'history'`)
	r.verify(expect{})
	var runs, failed int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	r.scalar(&failed, `SELECT count(*) FROM {s}.runs WHERE state <> 'completed'`)
	if runs != len(ids) || failed != 0 {
		t.Errorf("%d runs for %d tasks, %d not completed; want one completed run each", runs, len(ids), failed)
	}
	checkLeasePath(t, d)
}

// openFDs counts the open descriptors of process pid.
func openFDs(t *testing.T, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Skipf("no /proc/PID/fd: %v", err)
	}
	return len(ents)
}

// Ensure 300 clients trickling their request (150 their headers, 150 a
// POST's body) cost the daemon at most its connection cap in descriptors
// while they last, are all cut off by the read timeouts, and leave its
// descriptors where they were; the children run on undisturbed.
func TestUI_SlowClients(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var ids []int64
	for range 8 {
		ids = append(ids, r.enqueue("work", "w", `{"ms":4000}`, 1))
	}
	d, base := r.pageDaemon("slow", "3s")
	r.waitEvent("start", ids[0], 20*time.Second)
	addr := strings.TrimPrefix(base, "http://")
	before := openFDs(t, d.PID())
	const clients = 300
	var peak atomic.Int64
	stopPeak := poll(100*time.Millisecond, func() {
		if n := int64(openFDs(t, d.PID())); n > peak.Load() {
			peak.Store(n)
		}
	})
	var wg sync.WaitGroup
	var cut atomic.Int64
	started := time.Now()
	for i := range clients {
		head := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nX-Slow: "
		if i%2 == 1 {
			head = "POST /actions/enqueue HTTP/1.1\r\nHost: " + addr + "\r\nSec-Fetch-Site: same-origin\r\n" +
				"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nagent=w&lane=slow&payload="
		}
		wg.Go(func() {
			if trickle(addr, head, 2*time.Minute) {
				cut.Add(1)
			}
		})
	}
	fig.fault("slow-clients", clients)
	wg.Wait()
	stopPeak()
	after := openFDs(t, d.PID())
	t.Logf("daemon descriptors: %d before, at most %d with %d trickling clients, %d once all were cut off (%s); %d cut off by the daemon",
		before, peak.Load(), clients, after, time.Since(started).Round(time.Second), cut.Load())
	if cut.Load() != clients {
		t.Errorf("%d of %d trickling clients were still held after two minutes", clients-int(cut.Load()), clients)
	}
	if peak.Load() > int64(before+128+10) {
		t.Errorf("the daemon held %d descriptors for %d trickling clients, %d before: more than its cap of 128 connections", peak.Load(), clients, before)
	}
	if after > before+5 {
		t.Errorf("daemon descriptors: %d before the slow clients, %d after", before, after)
	}
	var slow int
	r.scalar(&slow, `SELECT count(*) FROM {s}.tasks WHERE lane = 'slow'`)
	if slow != 0 {
		t.Errorf("a trickled body enqueued %d tasks", slow)
	}
	r.verify(expect{})
	checkLeasePath(t, d)
}

// trickle connects to addr, sends head, then a byte every half second,
// until the server closes the connection (it returns true) or limit
// passes (false).
func trickle(addr, head string, limit time.Duration) bool {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	closed := make(chan struct{})
	go func() {
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				close(closed)
				return
			}
		}
	}()
	if _, err := c.Write([]byte(head)); err != nil {
		return true
	}
	deadline := time.After(limit)
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-closed:
			return true
		case <-deadline:
			return false
		case <-t.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return true
			}
		}
	}
}
