package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/qd-run/qd/lease"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// testLogger writes the server's log lines to the test's log.
func testLogger(tb testing.TB) hclog.Logger {
	tb.Helper()
	return hclog.New(&hclog.LoggerOptions{Name: tb.Name(), Output: tlogWriter{tb}, Level: hclog.Debug})
}

type tlogWriter struct{ tb testing.TB }

func (w tlogWriter) Write(p []byte) (int, error) {
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// fakeDaemon answers with its func fields; nil ones answer plainly.
type fakeDaemon struct {
	status   func(ctx context.Context) Snapshot
	progress func(ctx context.Context, runID int64) error
	metrics  http.Handler
	// tokens names the live runs' tokens; peer is the run of every peer
	// (none when nil); parents the parent_run of tasks, missing for none.
	tokens  map[string]RunRef
	peer    func(pid int) (RunRef, error)
	parents map[int64]int64
	// calls counts the calls of the endpoints' methods.
	calls *atomic.Int64
}

func (f fakeDaemon) called() {
	if f.calls != nil {
		f.calls.Add(1)
	}
}

func (f fakeDaemon) Metrics() http.Handler { return f.metrics }

func (f fakeDaemon) SetResult(_ context.Context, runID int64, result []byte) error {
	f.called()
	if err := lease.CheckResult(result); err != nil {
		return fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	if runID != 7 {
		return fmt.Errorf("run %d: %w", runID, ErrUnknownRun)
	}
	return nil
}

func (f fakeDaemon) ParentResults(_ context.Context, runID int64) (map[int64]json.RawMessage, error) {
	f.called()
	if runID != 7 {
		return nil, fmt.Errorf("run %d: %w", runID, ErrUnknownRun)
	}
	return map[int64]json.RawMessage{3: json.RawMessage(`{"a":1}`), 4: nil}, nil
}

func (f fakeDaemon) Defer(context.Context, int64, time.Duration) error { return ErrUnknownRun }

func (f fakeDaemon) Usage(context.Context, int64, UsageRequest) (UsageReported, error) {
	return UsageReported{}, ErrUnknownRun
}

func (f fakeDaemon) Spend(context.Context, string, int64) (Limit, error) {
	return Limit{}, ErrUnknownLimit
}

func (f fakeDaemon) Status(ctx context.Context, _ int) Snapshot {
	f.called()
	if f.status == nil {
		return Snapshot{}
	}
	return f.status(ctx)
}

func (f fakeDaemon) CancelTask(_ context.Context, taskID int64) (Cancelled, error) {
	f.called()
	switch taskID {
	case 5:
		return Cancelled{TaskID: 5, State: "running", RunID: 50}, nil
	case 404:
		return Cancelled{}, fmt.Errorf("task 404: %w", ErrUnknownTask)
	case 409:
		return Cancelled{}, fmt.Errorf("%w: task 409 is done", ErrConflict)
	}
	return Cancelled{TaskID: taskID, State: "cancelled"}, nil
}

func (f fakeDaemon) Wake(_ context.Context, agent string) error {
	f.called()
	if agent != "builder" {
		return fmt.Errorf("agent %q: %w; it runs: builder", agent, ErrUnknownAgent)
	}
	return nil
}

func (f fakeDaemon) Enqueue(ctx context.Context, req EnqueueRequest) (Enqueued, error) {
	f.called()
	if req.Lane == "" {
		return Enqueued{}, fmt.Errorf("lane is empty: %w", ErrBadRequest)
	}
	return Enqueued{TaskID: 9, Woken: req.Wake, ParentRun: CallerOf(ctx).RunID}, nil
}

func (f fakeDaemon) Progress(ctx context.Context, runID int64) error {
	f.called()
	if f.progress == nil {
		return nil
	}
	return f.progress(ctx, runID)
}

func (f fakeDaemon) RunOfToken(token string) RunRef { return f.tokens[token] }

func (f fakeDaemon) RunOfPeer(pid int) (RunRef, error) {
	if f.peer == nil {
		return RunRef{}, nil
	}
	return f.peer(pid)
}

func (f fakeDaemon) TaskParent(_ context.Context, taskID int64) (int64, error) {
	if taskID == 404 {
		return 0, fmt.Errorf("task 404: %w", ErrUnknownTask)
	}
	return f.parents[taskID], nil
}

func fixedSnapshot(name string) fakeDaemon {
	return fakeDaemon{status: func(context.Context) Snapshot {
		return Snapshot{Supervisor: name, Version: "test", PID: os.Getpid()}
	}}
}

// MustListen listens at path and serves until the test ends, then checks
// that Serve returned nil.
func MustListen(tb testing.TB, path string, snap Daemon) *Server {
	tb.Helper()
	s, err := Listen(path, snap, testLogger(tb))
	if err != nil {
		tb.Fatalf("Listen(%s): %v", path, err)
	}
	MustServe(tb, s)
	return s
}

// MustServe runs s.Serve in a goroutine and, at cleanup, shuts s down and
// checks Serve returned nil.
func MustServe(tb testing.TB, s *Server) {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.Shutdown(ctx); err != nil {
			tb.Errorf("Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
}

func MustFetch(tb testing.TB, path string) *Snapshot {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	snap, err := Client{Path: path}.Status(ctx)
	if err != nil {
		tb.Fatalf("Fetch(%s): %v", path, err)
	}
	return snap
}

// socketPath returns a path in a fresh temporary directory; the test
// binary's temporary directories are short enough for sun_path.
func socketPath(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "qd.sock")
}

// MustStaleSocket leaves a socket file at path that nobody listens on, as
// a daemon killed with SIGKILL does.
func MustStaleSocket(tb testing.TB, path string) {
	tb.Helper()
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		tb.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	if fi, err := os.Lstat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		tb.Fatalf("stale socket not left at %s: %v %v", path, fi, err)
	}
}

// MustOtherListener listens at path, as something other than a Server
// would (another process, or not qd at all), until the test ends.
func MustOtherListener(tb testing.TB, path string) net.Listener {
	tb.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { ln.Close() })
	return ln
}

// MustAnswer fails the test, saying what, unless something at path accepts
// a connection.
func MustAnswer(tb testing.TB, path, what string) {
	tb.Helper()
	conn, err := net.Dial("unix", path)
	if err != nil {
		tb.Fatalf("%s: %v", what, err)
	}
	conn.Close()
}

func TestListen_Mode(t *testing.T) {
	// Ensure nothing in the socket's directory is ever reachable by another
	// user while Listen runs, even with umask 000, and that a missing
	// parent directory is created 0700.
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	parent := filepath.Join(t.TempDir(), "run")
	path := filepath.Join(parent, "qd.sock")

	var stop atomic.Bool
	var seen atomic.Int64
	var wide []string
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			wide = append(wide, wideEntries(parent, &seen)...)
		}
	}()
	for range 50 {
		s, err := Listen(path, fixedSnapshot("a"), hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	stop.Store(true)
	wg.Wait()

	if len(wide) > 0 {
		t.Fatalf("saw %d entries wider than allowed, first: %s", len(wide), wide[0])
	}
	if seen.Load() == 0 {
		t.Fatal("the poller never saw the socket; the test proved nothing")
	}
	fi, err := os.Stat(parent)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fi.Mode().Perm(), fs.FileMode(0o700); got != want {
		t.Fatalf("parent mode = %v, want %v", got, want)
	}
	t.Logf("socket observed %d times, never wider than 0600", seen.Load())
}

// wideEntries lists entries of dir another user could reach: a socket
// wider than 0600, or a directory wider than 0700 (the private bind
// directory).
func wideEntries(dir string, seen *atomic.Int64) []string {
	entries, _ := os.ReadDir(dir)
	var wide []string
	for _, e := range entries {
		fi, err := os.Lstat(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		switch fi.Mode().Type() {
		case fs.ModeSocket:
			seen.Add(1)
			if fi.Mode().Perm()&^0o600 != 0 {
				wide = append(wide, e.Name()+" "+fi.Mode().String())
			}
		case fs.ModeDir:
			if fi.Mode().Perm()&^0o700 != 0 {
				wide = append(wide, e.Name()+" "+fi.Mode().String())
			}
		}
	}
	return wide
}

func TestListen_LiveDaemonNotStolen(t *testing.T) {
	t.Run("SecondQD", func(t *testing.T) {
		// Ensure a second daemon refuses to start, naming the first one's
		// pid, and the first keeps answering.
		path := socketPath(t)
		MustListen(t, path, fixedSnapshot("first"))

		_, err := Listen(path, fixedSnapshot("second"), testLogger(t))
		if err == nil {
			t.Fatal("second Listen succeeded")
		}
		want := "another qd is running (pid " + strconv.Itoa(os.Getpid())
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("err = %q, want it to contain %q", err, want)
		}
		if got := MustFetch(t, path).Supervisor; got != "first" {
			t.Fatalf("supervisor = %q, want first", got)
		}
	})
	t.Run("SocketAnswers", func(t *testing.T) {
		// Ensure a socket that answers is never removed, even when no
		// lock file guards it.
		path := socketPath(t)
		MustOtherListener(t, path)

		_, err := Listen(path, fixedSnapshot("second"), testLogger(t))
		if err == nil || !strings.Contains(err.Error(), "another qd is running (socket "+path+" answers)") {
			t.Fatalf("err = %v, want another qd is running", err)
		}
		MustAnswer(t, path, "the live socket stopped answering")
	})
}

func TestListen_StaleSocket(t *testing.T) {
	// Ensure a socket left by a dead daemon is replaced without manual
	// cleanup, and the new one is 0600.
	path := socketPath(t)
	MustStaleSocket(t, path)

	MustListen(t, path, fixedSnapshot("new"))
	if got := MustFetch(t, path).Supervisor; got != "new" {
		t.Fatalf("supervisor = %q, want new", got)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Fatalf("mode = %v, want 0600", got)
	}
}

func TestListen_NotASocket(t *testing.T) {
	t.Run("RegularFile", func(t *testing.T) {
		// Ensure a regular file at the socket path is refused and kept.
		path := socketPath(t)
		if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Listen(path, fixedSnapshot("a"), testLogger(t))
		if err == nil || !strings.Contains(err.Error(), "is not a socket (a regular file)") {
			t.Fatalf("err = %v, want not a socket", err)
		}
		if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
			t.Fatalf("file changed: %q, %v", b, err)
		}
	})
	t.Run("Symlink", func(t *testing.T) {
		// Ensure a symlink at the socket path is refused, not followed and
		// kept, even when it points at a stale socket.
		path := socketPath(t)
		target := filepath.Join(filepath.Dir(path), "target.sock")
		MustStaleSocket(t, target)
		if err := os.Symlink(target, path); err != nil {
			t.Fatal(err)
		}
		_, err := Listen(path, fixedSnapshot("a"), testLogger(t))
		if err == nil || !strings.Contains(err.Error(), "is not a socket (a symbolic link)") {
			t.Fatalf("err = %v, want not a socket", err)
		}
		if got, err := os.Readlink(path); err != nil || got != target {
			t.Fatalf("symlink changed: %q, %v", got, err)
		}
		if _, err := os.Lstat(target); err != nil {
			t.Fatalf("symlink target removed: %v", err)
		}
	})
}

func TestListen_LongPath(t *testing.T) {
	// Ensure a path too long for sun_path fails with an error naming the
	// path and the limit, from both Listen and Fetch.
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 60), strings.Repeat("e", 60))
	path := filepath.Join(dir, "qd.sock")
	_, err := Listen(path, fixedSnapshot("a"), testLogger(t))
	if err == nil {
		t.Fatal("Listen succeeded")
	}
	for _, want := range []string{path, "sun_path is " + strconv.Itoa(sunPathSize) + " bytes"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("Listen err = %q, want it to contain %q", err, want)
		}
	}
	if _, err := (Client{Path: path}).Status(context.Background()); err == nil || !strings.Contains(err.Error(), "sun_path") {
		t.Fatalf("Fetch err = %v, want the sun_path limit", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Listen created %s despite refusing the path: %v", dir, err)
	}
}

func TestServer_Shutdown(t *testing.T) {
	t.Run("RemovesOwnSocket", func(t *testing.T) {
		// Ensure Shutdown removes the socket and frees the path for the
		// next daemon.
		path := socketPath(t)
		s, err := Listen(path, fixedSnapshot("a"), testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("socket still there after Shutdown: %v", err)
		}
		MustListen(t, path, fixedSnapshot("b"))
		if got := MustFetch(t, path).Supervisor; got != "b" {
			t.Fatalf("supervisor = %q, want b", got)
		}
	})
	t.Run("LeavesOthersSocket", func(t *testing.T) {
		// Ensure Shutdown does not remove a socket someone else bound at
		// the path after ours was replaced.
		path := socketPath(t)
		s, err := Listen(path, fixedSnapshot("a"), testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		os.Remove(path)
		MustOtherListener(t, path)
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
		MustAnswer(t, path, "the other socket was removed")
	})
}

func TestServer_IdleClients(t *testing.T) {
	// Ensure 50 clients that connect and send nothing neither block status
	// requests nor delay shutdown, even while their header timeout is far
	// away.
	path := socketPath(t)
	s, err := Listen(path, fixedSnapshot("busy"), testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	s.hs.ReadHeaderTimeout = 10 * time.Minute
	s.hs.ReadTimeout = 10 * time.Minute
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()

	var idle []net.Conn
	for range 50 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	for range 3 {
		if got := MustFetch(t, path).Supervisor; got != "busy" {
			t.Fatalf("supervisor = %q, want busy", got)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	for i, c := range idle {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if n, err := c.Read(make([]byte, 1)); err == nil {
			t.Fatalf("idle client %d read %d bytes after shutdown, want the connection closed", i, n)
		}
	}
}

func TestServer_HTTP(t *testing.T) {
	path := socketPath(t)
	MustListen(t, path, fakeDaemon{
		status: func(ctx context.Context) Snapshot {
			return Snapshot{Supervisor: "web", Runs: []LiveRun{{RunID: 7, SilentSeconds: 2.5, LastOutputAt: When(time.Now())}}}
		},
		progress: func(_ context.Context, id int64) error {
			if id != 7 {
				return fmt.Errorf("run %d: %w", id, ErrUnknownRun)
			}
			return nil
		},
	})
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		},
	}}

	t.Run("RunsParameter", func(t *testing.T) {
		// Ensure a runs parameter that is not a count or "all" is refused
		// naming it, and the daemon is not asked.
		for _, v := range []string{"-1", "some", "1.5"} {
			resp, err := client.Get("http://qd/v1/status?runs=" + v)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(body), "runs=") {
				t.Errorf("runs=%s: %d %q; want 400 naming runs", v, resp.StatusCode, body)
			}
		}
		for _, v := range []string{"0", "3", "all"} {
			resp, err := client.Get("http://qd/v1/status?runs=" + v)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("runs=%s: %d, want 200", v, resp.StatusCode)
			}
		}
	})

	t.Run("SnakeCaseJSON", func(t *testing.T) {
		// Ensure the JSON uses the documented snake_case names and empty
		// lists are [] rather than null.
		resp, err := client.Get("http://qd/v1/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if got := resp.Header.Get("Content-Type"); got != "application/json" {
			t.Fatalf("Content-Type = %q", got)
		}
		var raw map[string]json.RawMessage
		if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil {
			t.Fatal(err)
		}
		if got, want := string(raw["agents"]), "[]"; got != want {
			t.Fatalf("agents = %s, want %s", got, want)
		}
		var runs []map[string]any
		if err := json.Unmarshal(raw["runs"], &runs); err != nil {
			t.Fatal(err)
		}
		if got, want := runs[0]["silent_seconds"], 2.5; got != want {
			t.Fatalf("runs[0].silent_seconds = %v, want %v", got, want)
		}
		for _, key := range []string{"run_id", "task_id", "lease_left_seconds", "output_silent_seconds", "last_output_at"} {
			if _, ok := runs[0][key]; !ok {
				t.Fatalf("runs[0] lacks %q: %v", key, runs[0])
			}
		}
	})
	t.Run("WrongMethod", func(t *testing.T) {
		// Ensure the socket is read-only: POST is refused.
		resp, err := client.Post("http://qd/v1/status", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got, want := resp.StatusCode, http.StatusMethodNotAllowed; got != want {
			t.Fatalf("status = %d, want %d", got, want)
		}
	})
	t.Run("Curl", func(t *testing.T) {
		// Ensure the documented curl command works.
		curl, err := exec.LookPath("curl")
		if err != nil {
			t.Skip("curl not installed")
		}
		out, err := exec.Command(curl, "-sS", "--unix-socket", path, "http://qd/v1/status").CombinedOutput()
		if err != nil {
			t.Fatalf("curl: %v: %s", err, out)
		}
		if !strings.Contains(string(out), `"supervisor": "web"`) {
			t.Fatalf("curl output lacks the supervisor:\n%s", out)
		}
	})
	t.Run("CompactForJSONClients", func(t *testing.T) {
		// Ensure a client that asks for application/json (qd's own) gets
		// the status without indentation, which costs more than building
		// it when runs are many, and a person with curl gets it indented.
		req, _ := http.NewRequest(http.MethodGet, "http://qd/v1/status", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Count(string(body), "\n") != 1 || !strings.Contains(string(body), `"supervisor":"web"`) {
			t.Fatalf("status for a JSON client is not compact:\n%s", body)
		}
	})
}

func TestFetch_NotRunning(t *testing.T) {
	t.Run("NoFile", func(t *testing.T) {
		// Ensure the error says no daemon answers and names the path.
		path := socketPath(t)
		_, err := Client{Path: path}.Status(context.Background())
		want := "no qd daemon is answering at " + path + " (connect: no such file or directory); is `qd run` running?"
		if err == nil || err.Error() != want {
			t.Fatalf("err = %v\nwant %s", err, want)
		}
		if !errors.Is(err, ErrNotRunning) {
			t.Fatal("errors.Is(err, ErrNotRunning) = false")
		}
	})
	t.Run("StaleSocket", func(t *testing.T) {
		// Ensure a socket left by a dead daemon reads as not running.
		path := socketPath(t)
		MustStaleSocket(t, path)
		_, err := Client{Path: path}.Status(context.Background())
		if !errors.Is(err, ErrNotRunning) || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want ErrNotRunning naming %s", err, path)
		}
	})
	t.Run("NotHTTP", func(t *testing.T) {
		// Ensure something that is not qd at the path gives an error naming
		// the path, not a hang.
		path := socketPath(t)
		ln := MustOtherListener(t, path)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				io.WriteString(c, "hello\n")
				c.Close()
			}
		}()
		_, err := Client{Path: path}.Status(context.Background())
		if err == nil || !strings.Contains(err.Error(), path) {
			t.Fatalf("err = %v, want an error naming %s", err, path)
		}
	})
}

func TestListen_LockHolderNamed(t *testing.T) {
	// Ensure the refusal names the lock file along with the holder's pid.
	path := socketPath(t)
	MustListen(t, path, fixedSnapshot("first"))
	_, err := Listen(path, fixedSnapshot("second"), testLogger(t))
	want := "another qd is running (pid " + strconv.Itoa(os.Getpid()) + " holds " + path + ".lock)"
	if err == nil || err.Error() != want {
		t.Fatalf("err = %v\nwant %s", err, want)
	}
}

// Ensure Progress reaches the daemon for a run it has, comes back as
// ErrUnknownRun for one it does not, and that a bad run id is refused with
// 400 before the daemon is asked.
func TestClient_Progress(t *testing.T) {
	path := socketPath(t)
	var asked atomic.Int64
	MustListen(t, path, fakeDaemon{
		status: func(context.Context) Snapshot { return Snapshot{} },
		progress: func(_ context.Context, id int64) error {
			asked.Add(1)
			if id != 7 {
				return fmt.Errorf("run %d: %w", id, ErrUnknownRun)
			}
			return nil
		},
	})
	c := Client{Path: path}
	if err := c.Progress(context.Background(), 7); err != nil {
		t.Errorf("progress of run 7: %v", err)
	}
	if err := c.Progress(context.Background(), 8); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("progress of run 8: got %v, want ErrUnknownRun", err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	resp, err := hc.Post("http://qd/v1/runs/x/progress", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || asked.Load() != 2 {
		t.Errorf("bad run id: status %d, daemon asked %d times; want 400 and 2", resp.StatusCode, asked.Load())
	}
	if err := (Client{Path: socketPath(t)}).Progress(context.Background(), 7); !errors.Is(err, ErrNotRunning) {
		t.Errorf("progress with no daemon: got %v, want ErrNotRunning", err)
	}
}

// Ensure a cancel answers with the task's state and the run the daemon
// stopped (0 for none), an unknown or finished task comes back as
// ErrUnknownTask or ErrConflict, a wake of an agent the daemon runs succeeds, and one of an agent it does
// not run matches ErrUnknownAgent and says which it runs.
func TestClient_CancelAndWake(t *testing.T) {
	path := socketPath(t)
	MustListen(t, path, fixedSnapshot("ctl"))
	c := Client{Path: path}
	ctx := context.Background()
	if got, err := c.CancelTask(ctx, 5); err != nil || got != (Cancelled{TaskID: 5, State: "running", RunID: 50}) {
		t.Errorf("cancel task 5: %+v, %v; want run 50 stopped", got, err)
	}
	if got, err := c.CancelTask(ctx, 6); err != nil || got != (Cancelled{TaskID: 6, State: "cancelled"}) {
		t.Errorf("cancel task 6: %+v, %v; want cancelled, no run stopped", got, err)
	}
	if _, err := c.CancelTask(ctx, 404); !errors.Is(err, ErrUnknownTask) || !strings.Contains(err.Error(), "task 404") {
		t.Errorf("cancel task 404: %v; want ErrUnknownTask naming it", err)
	}
	if _, err := c.CancelTask(ctx, 409); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "is done") {
		t.Errorf("cancel task 409: %v; want ErrConflict with the daemon's words", err)
	}
	if err := c.Wake(ctx, "builder"); err != nil {
		t.Errorf("wake builder: %v", err)
	}
	err := c.Wake(ctx, "ghost")
	if !errors.Is(err, ErrUnknownAgent) || !strings.Contains(err.Error(), "it runs: builder") {
		t.Errorf("wake ghost: got %v, want ErrUnknownAgent naming builder", err)
	}
}

// Ensure an enqueue through the socket carries the task and its payload
// byte for byte, that a refusal comes back as ErrBadRequest with the
// daemon's words, and that a body past the limit is refused.
func TestClient_Enqueue(t *testing.T) {
	path := socketPath(t)
	MustListen(t, path, fixedSnapshot("q"))
	c := Client{Path: path}
	ctx := context.Background()
	res, err := c.Enqueue(ctx, EnqueueRequest{Lane: "l", Agent: "a", Payload: json.RawMessage(`{"k": [1, 2]}`), Wake: true})
	if err != nil || res.TaskID != 9 || !res.Woken {
		t.Errorf("enqueue: %+v, %v; want task 9, woken", res, err)
	}
	_, err = c.Enqueue(ctx, EnqueueRequest{Agent: "a"})
	if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "lane is empty") {
		t.Errorf("enqueue without a lane: got %v, want ErrBadRequest saying why", err)
	}
	big := EnqueueRequest{Lane: "l", Agent: "a", Payload: json.RawMessage(`"` + strings.Repeat("x", 4<<20) + `"`)}
	if _, err := c.Enqueue(ctx, big); !errors.Is(err, ErrBadRequest) {
		t.Errorf("enqueue of 4 MiB: got %v, want refused", err)
	}
}

// Ensure a result reaches the daemon, one that is not JSON or past the
// limit comes back as ErrBadRequest, and the parents' results come back
// as one object keyed by task id.
func TestClient_Result(t *testing.T) {
	path := socketPath(t)
	MustListen(t, path, fixedSnapshot("r"))
	c := Client{Path: path}
	ctx := context.Background()
	if err := c.SetResult(ctx, 7, []byte(`{"found": 2}`)); err != nil {
		t.Errorf("result of run 7: %v", err)
	}
	if err := c.SetResult(ctx, 8, []byte(`1`)); !errors.Is(err, ErrUnknownRun) {
		t.Errorf("result of run 8: got %v, want ErrUnknownRun", err)
	}
	if err := c.SetResult(ctx, 7, []byte(`{`)); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Errorf("a result that is not JSON: got %v, want ErrBadRequest saying so", err)
	}
	big := []byte(`"` + strings.Repeat("x", lease.MaxResultBytes) + `"`)
	if err := c.SetResult(ctx, 7, big); !errors.Is(err, ErrBadRequest) {
		t.Errorf("a result past 1 MiB: got %v, want ErrBadRequest", err)
	}
	got, err := c.ParentResults(ctx, 7)
	var m map[string]json.RawMessage
	var three bytes.Buffer
	if err != nil || json.Unmarshal(got, &m) != nil || json.Compact(&three, m["3"]) != nil || three.String() != `{"a":1}` ||
		string(m["4"]) != "null" || len(m) != 2 {
		t.Errorf("parents of run 7: %s, %v; want {\"3\": {\"a\":1}, \"4\": null}", got, err)
	}
}

// Ensure the metrics endpoint serves the daemon's handler as it answers,
// and that a daemon with none answers 404.
func TestClient_Metrics(t *testing.T) {
	path := socketPath(t)
	text := "# TYPE qd_heartbeat_loop_passes_total counter\nqd_heartbeat_loop_passes_total 7\n"
	MustListen(t, path, fakeDaemon{metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, text)
	})})
	ctx := context.Background()
	got, err := Client{Path: path}.Metrics(ctx)
	if err != nil || string(got) != text {
		t.Errorf("metrics: %q, %v; want %q", got, err, text)
	}
	bare := socketPath(t)
	MustListen(t, bare, fakeDaemon{})
	if _, err := (Client{Path: bare}).Metrics(ctx); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("metrics of a daemon without them: %v, want a 404", err)
	}
}
