package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// scrapeSocket reads the daemon's metrics as docs/metrics.md says to, with
// curl over the unix socket, or through api.Client where curl is missing.
func scrapeSocket(t *testing.T, sock string) testkit.Scrape {
	t.Helper()
	var text []byte
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-sSf", "--max-time", "10", "--unix-socket", sock, "http://qd/v1/metrics").Output()
		if err != nil {
			t.Fatalf("curl --unix-socket %s: %v", sock, err)
		}
		text = out
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if text, err = (api.Client{Path: sock}).Metrics(ctx); err != nil {
			t.Fatal(err)
		}
	}
	s, err := testkit.ParseMetrics(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func waitScrape(t *testing.T, sock string, want float64, name string, labels ...string) testkit.Scrape {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s := scrapeSocket(t, sock)
		v, ok := s.Value(name, labels...)
		if v >= want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v never reached %v: last %v (present %v)", name, labels, want, v, ok)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ensure the built daemon's metrics, read with curl on its socket, count a
// completed run, a cancel and a timeout as a user would see them, and that
// the socat forwarder of docs/metrics.md serves the same exposition over
// TCP for Prometheus.
func TestMetrics_Socket(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	hang := testkit.MustScript(t, dir, "hang.sh", "echo started\nsleep 1000\n")
	quick := testkit.MustScript(t, dir, "quick.sh", "echo ok\n")
	d := testkit.StartDaemon(t, qd, db, "metrics", fmt.Sprintf(`
agent "hang" {
  command    = [%q]
  schedule   = "@every 1s"
  lanes      = ["m"]
  kill_grace = "1s"
}
agent "late" {
  command    = [%q]
  schedule   = "@every 1s"
  lanes      = ["t"]
  timeout    = "1s"
  kill_grace = "1s"
}
agent "quick" {
  command  = [%q]
  schedule = "@every 1s"
  lanes    = ["q"]
}`, hang, hang, quick), testkit.DaemonOptions{})
	cancelled := enqueue(t, qd, db, "m", "hang", "--max-attempts", "1")
	enqueue(t, qd, db, "t", "late", "--max-attempts", "1")
	enqueue(t, qd, db, "q", "quick")

	waitScrape(t, d.Socket, 1, "qd_agent_children", "agent", "hang")
	testkit.MustQD(t, qd, db, "cancel", cancelled)
	waitScrape(t, d.Socket, 1, "qd_run_kills_total", "agent", "hang", "reason", "cancel")
	waitScrape(t, d.Socket, 1, "qd_run_kills_total", "agent", "late", "reason", "timeout")
	s := waitScrape(t, d.Socket, 1, "qd_runs_finished_total", "agent", "quick", "outcome", "completed")
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"qd_runs_finished_total", []string{"agent", "hang", "lane", "m", "outcome", "cancelled"}, 1},
		{"qd_runs_finished_total", []string{"agent", "late", "outcome", "abandoned"}, 1},
		{"qd_runs_started_total", nil, 3},
		{"qd_agent_children", nil, 0},
		{"qd_lane_queued_tasks", []string{"lane", "q"}, 0},
		{"qd_queue_up", nil, 1},
	} {
		if got, ok := s.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (present %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if v, _ := s.Value("qd_build_info"); v != 1 {
		t.Errorf("qd_build_info = %v, want 1", v)
	}

	socat, err := exec.LookPath("socat")
	curl, err2 := exec.LookPath("curl")
	if err != nil || err2 != nil {
		t.Log("socat or curl not installed: the TCP forwarder is not checked")
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	fwd := exec.Command(socat, "TCP-LISTEN:"+strconv.Itoa(port)+",bind=127.0.0.1,fork,reuseaddr", "UNIX-CONNECT:"+d.Socket)
	if err := fwd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fwd.Process.Kill(); _ = fwd.Wait() })
	url := fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", port)
	var text []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if text, err = exec.Command(curl, "-sSf", "--max-time", "5", url).Output(); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl %s through socat: %v", url, err)
		}
	}
	over, err := testkit.ParseMetrics(bytes.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := over.Value("qd_runs_finished_total", "agent", "quick"); v != 1 {
		t.Errorf("through socat: qd_runs_finished_total{agent=quick} = %v, want 1", v)
	}
}
