package supervisor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// fakeProvider wraps a real provider; non-nil func fields replace methods.
type fakeProvider struct {
	lease.Provider
	HeartbeatFn func(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error)
	SettleFn    func(ctx context.Context, s ...lease.Settlement) ([]error, error)
}

func (f *fakeProvider) Heartbeat(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
	if f.HeartbeatFn != nil {
		return f.HeartbeatFn(ctx, beats...)
	}
	return f.Provider.Heartbeat(ctx, beats...)
}

func (f *fakeProvider) Settle(ctx context.Context, s ...lease.Settlement) ([]error, error) {
	if f.SettleFn != nil {
		return f.SettleFn(ctx, s...)
	}
	return f.Provider.Settle(ctx, s...)
}

// testWriter sends log lines to t.Log until the test ends.
// and keeps them for text.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
	all  strings.Builder
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// text is everything logged so far.
func (w *testWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

// MustLogger returns a logger writing to tb until it ends.
func MustLogger(tb testing.TB) hclog.Logger {
	tb.Helper()
	log, _ := mustLogger(tb)
	return log
}

func mustLogger(tb testing.TB) (hclog.Logger, *testWriter) {
	w := &testWriter{t: tb}
	tb.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Debug}), w
}

// harness is a supervisor running its loop against an in-memory queue.
type harness struct {
	t     *testing.T
	mem   *memlease.Provider
	s     *Supervisor
	state string
	lanes atomic.Int64
	loops atomic.Int64
	dones atomic.Int64

	mu   sync.Mutex
	ends []End // what OnEnd was told, in order
	log  *testWriter
}

// endOf returns what OnEnd was told of run id, and whether it was.
func (h *harness) endOf(id int64) (End, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range h.ends {
		if e.Lease.RunID == id {
			return e, true
		}
	}
	return End{}, false
}

// MustHarness starts a supervisor; wrap may replace provider methods.
func MustHarness(t *testing.T, wrap func(*fakeProvider)) *harness {
	t.Helper()
	h := &harness{t: t, mem: memlease.New(), state: t.TempDir()}
	fake := &fakeProvider{Provider: h.mem}
	if wrap != nil {
		wrap(fake)
	}
	log, w := mustLogger(t)
	h.log = w
	s, err := New(Config{Provider: fake, Logger: log, StateDir: h.state,
		Owner: "test", Instance: "i1", OnLoop: func() { h.loops.Add(1) },
		OnDone: func(string) { h.dones.Add(1) },
		OnEnd:  func(e End) { h.mu.Lock(); h.ends = append(h.ends, e); h.mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	h.s = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Loop(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Loop returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Loop did not return after its context ended")
		}
	})
	return h
}

// claim enqueues a task with payload in a lane of its own and claims it.
func (h *harness) claim(payload string, leaseFor time.Duration) *lease.Lease {
	h.t.Helper()
	ctx := context.Background()
	lane := fmt.Sprintf("lane-%d", h.lanes.Add(1))
	if _, _, err := h.mem.Enqueue(ctx, lease.EnqueueParams{Lane: lane, Agent: "agent",
		Payload: []byte(payload), MaxAttempts: 3}); err != nil {
		h.t.Fatal(err)
	}
	l, err := h.mem.Claim(ctx, lease.ClaimParams{Lanes: []string{lane}, Owner: "test",
		Instance: "i1", Lease: leaseFor})
	if err != nil {
		h.t.Fatal(err)
	}
	return l
}

// start claims a task and runs the shell script body for it.
func (h *harness) start(body, payload string, spec Spec) *lease.Lease {
	h.t.Helper()
	if spec.Lease == 0 {
		spec.Lease = 30 * time.Second
	}
	l := h.claim(payload, spec.Lease)
	spec.Agent = "agent"
	spec.Command = []string{MustScript(h.t, body)}
	if err := h.s.Start(l, spec); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	return l
}

// MustScript writes an executable shell script and returns its path.
func MustScript(tb testing.TB, body string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "agent.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

// waitRun waits for run id to leave the running state.
func (h *harness) waitRun(id int64) lease.Run {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		r, err := h.mem.Run(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		if r.State != lease.RunRunning {
			return r
		}
		time.Sleep(20 * time.Millisecond)
	}
	h.t.Fatalf("run %d still running after 60s", id)
	return lease.Run{}
}

// waitGone waits until the supervisor has forgotten every run.
func (h *harness) waitGone() {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(h.s.Snapshot()) > 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("runs still live after 60s: %+v", h.s.Snapshot())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (h *harness) task(id int64) lease.Task {
	h.t.Helper()
	task, err := h.mem.Task(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return task
}

// MustReadPID waits for a script to write a pid into path and returns it.
func MustReadPID(tb testing.TB, path string) int {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && pid > 0 {
			return pid
		}
		time.Sleep(20 * time.Millisecond)
	}
	tb.Fatalf("no pid in %s", path)
	return 0
}

// alive reports whether pid runs (a zombie does not count).
func alive(pid int) bool {
	_, ok := procStart(pid)
	return ok
}

// MustDie waits up to 10s for pid to be gone.
func MustDie(tb testing.TB, pid int, what string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			tb.Fatalf("%s (pid %d) still alive", what, pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// idleSlots is how many empty run cgroups the supervisor keeps for its
// next runs.
func (s *Supervisor) idleSlots() int {
	if s.cg == nil {
		return 0
	}
	return s.cg.idleSlots()
}
