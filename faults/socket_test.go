package faults

import (
	"context"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a second daemon on a live daemon's socket refuses to start and
// leaves the socket answering for the first; after kill -9 the stale
// socket is recovered by the next start without manual cleanup.
func TestSocket_TakeoverAndStale(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	body := r.agentHCL(agentConf{name: "w"})
	a := r.daemon("sock-a", body, testkit.DaemonOptions{})
	conf := filepath.Join(r.dir, "second.hcl")
	text := fmt.Sprintf("name = \"sock-b\"\nsocket = %q\nstate_dir = %q\n%s", a.Socket, filepath.Join(r.dir, "state-b"), body)
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	before := r.tableCounts()
	cmd := exec.Command(r.qd, "run", "--config", conf)
	cmd.Env = append(os.Environ(), "QD_DATABASE_URL="+r.url)
	fig.fault("socket-takeover", 1)
	out, err := runFor(cmd, 15*time.Second)
	if err == nil {
		t.Errorf("second daemon on a live socket exited 0:\n%s", out)
	}
	if !strings.Contains(out, "another qd is running") {
		t.Errorf("second daemon's refusal does not say another qd runs:\n%s", out)
	}
	if got := a.Status(t).Supervisor; got != "sock-a" {
		t.Errorf("socket answers for %q after the takeover attempt, want sock-a", got)
	}
	if after := r.tableCounts(); after != before {
		t.Errorf("refused daemon wrote to the database: %s before, %s after", before, after)
	}
	a.Kill()
	fig.fault("sigkill-daemon", 1)
	if _, err := os.Lstat(a.Socket); err != nil {
		t.Logf("no stale socket left by kill -9 (%v); the restart still has to work", err)
	}
	b := r.daemon("sock-a2", body, testkit.DaemonOptions{Dir: a.Dir})
	if got := b.Status(t).Supervisor; got != "sock-a2" {
		t.Errorf("restarted daemon's socket answers for %q", got)
	}
}

// runFor runs cmd with a deadline and returns its combined output.
func runFor(cmd *exec.Cmd, d time.Duration) (string, error) {
	var buf strings.Builder
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return buf.Write(p) })
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		return "", err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		mu.Lock()
		defer mu.Unlock()
		return buf.String(), err
	case <-time.After(d):
		_ = cmd.Process.Kill()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return buf.String(), fmt.Errorf("still running after %s", d)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// Ensure that with umask 000 the status socket, and the directory it is
// bound in, are never open to group or others at any moment of start-up.
func TestSocket_ModeDuringBind(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dir := testkit.MustShortDir(t, "qd-sock-")
	sock := filepath.Join(dir, "run", "qd.sock")
	conf := filepath.Join(dir, "qd.hcl")
	text := fmt.Sprintf("name = \"umask\"\nsocket = %q\nstate_dir = %q\n", sock, filepath.Join(dir, "state"))
	if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	var widest atomic.Uint32
	var seen atomic.Bool
	stop := poll(0, func() {
		if fi, err := os.Lstat(sock); err == nil {
			seen.Store(true)
			widest.Store(widest.Load() | uint32(fi.Mode().Perm()&0o077))
		}
		ents, _ := os.ReadDir(filepath.Dir(sock))
		for _, e := range ents {
			if e.IsDir() {
				if fi, err := e.Info(); err == nil {
					widest.Store(widest.Load() | uint32(fi.Mode().Perm()&0o077))
				}
			}
		}
	})
	cmd := exec.Command("sh", "-c", `umask 000 && exec "$0" run --config "$1"`, r.qd, conf)
	cmd.Env = append(os.Environ(), "QD_DATABASE_URL="+r.url)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	testkit.Eventually(t, 20*time.Second, "the socket to answer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_, err := api.Client{Path: sock}.Status(ctx)
		return err == nil
	})
	stop()
	fig.fault("umask-000", 1)
	if !seen.Load() {
		t.Fatalf("socket %s never seen", sock)
	}
	if w := fs.FileMode(widest.Load()); w != 0 {
		t.Errorf("socket or its bind directory was open to group/others (bits %#o) during start-up", w)
	}
}

// Ensure clients that connect to the status socket and send nothing, or
// half a request, do not stall heartbeats: the run keeps its lease and
// completes once, and `qd status` still answers.
func TestSocket_SilentClients(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("slow", "w", `{"mode":"sleep","ms":8000}`, 3)
	d := r.daemon("silent", r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"}), testkit.DaemonOptions{})
	r.waitEvent("start", id, 20*time.Second)
	var conns []net.Conn
	for i := range 64 {
		c, err := net.Dial("unix", d.Socket)
		if err != nil {
			t.Fatalf("connect %d: %v", i, err)
		}
		if i%2 == 1 {
			_, _ = c.Write([]byte("GET /v1/status HTTP/1.1\r\nHost: qd\r\n"))
		}
		conns = append(conns, c)
	}
	fig.fault("slowloris", 1)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	since := r.dbNow()
	time.Sleep(3 * time.Second)
	r.waitHeartbeat("silent", since, 5*time.Second)
	if s := d.Status(t); len(s.Runs) != 1 {
		t.Errorf("status with silent clients connected: %d runs, want 1", len(s.Runs))
	}
	r.verify(expect{})
	var runs int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	if runs != 1 {
		t.Errorf("%d runs: the run lost its lease while silent clients held the socket", runs)
	}
}
