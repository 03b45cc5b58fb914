package daemon

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// fakeServer is a LocalServer in memory: it dies when told, and records
// its starts and its stop.
type fakeServer struct {
	mu      sync.Mutex
	dead    bool
	starts  int
	stopped time.Time
	onStop  func() // runs inside Stop
	looks   int    // calls of Died
	// deaths, when not nil, makes the server one that can be waited on:
	// Await returns when kill sends on it.
	deaths chan struct{}
}

func (f *fakeServer) server(withStop bool) *LocalServer {
	s := &LocalServer{Name: "the fake server",
		Died: func() bool { f.mu.Lock(); defer f.mu.Unlock(); f.looks++; return f.dead },
		Start: func(context.Context) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.dead = false
			f.starts++
			return nil
		},
	}
	if f.deaths != nil {
		s.Await = func(ctx context.Context, d time.Duration) {
			select {
			case <-ctx.Done():
			case <-f.deaths:
			case <-time.After(d):
			}
		}
	}
	if withStop {
		s.Stop = func(context.Context) error {
			if f.onStop != nil {
				f.onStop()
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			f.stopped = time.Now()
			return nil
		}
	}
	return s
}

func (f *fakeServer) kill() {
	f.mu.Lock()
	f.dead = true
	f.mu.Unlock()
	if f.deaths != nil {
		f.deaths <- struct{}{}
	}
}

func (f *fakeServer) counts() (int, time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.starts, f.stopped
}

// startWithServer runs the daemon on q with the agents of body and the
// local server s, and returns its signal channel and the channel of Run's
// result, once its socket answers.
func startWithServer(t *testing.T, q lease.Provider, body string, s *LocalServer) (chan os.Signal, chan error) {
	t.Helper()
	dir, err := os.MkdirTemp("", "qdd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	td := &testDaemon{t: t, dir: dir, conf: filepath.Join(dir, "qd.hcl")}
	td.api.Path = filepath.Join(dir, "qd.sock")
	td.write("srv", body)
	conf, err := config.Load(td.conf)
	if err != nil {
		t.Fatal(err)
	}
	sigs, done := make(chan os.Signal, 4), make(chan error, 1)
	go func() {
		done <- Run(context.Background(), Options{Config: conf, Queue: backendOf(q), Stderr: testWriter{t},
			Signals: sigs, Server: s})
	}()
	t.Cleanup(func() {
		select {
		case sigs <- syscall.SIGTERM:
		default:
		}
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Error("daemon did not stop")
		}
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := td.status(); err == nil {
			return sigs, done
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon socket did not answer")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Ensure the daemon starts its local server again soon after it dies,
// and only then; and that a server with no Stop is left running at exit.
func TestDaemon_LocalServerStartedAgain(t *testing.T) {
	t.Parallel()
	f := &fakeServer{}
	sigs, done := startWithServer(t, memlease.New(), "", f.server(false))
	time.Sleep(3 * serverCheckEvery)
	if n, _ := f.counts(); n != 0 {
		t.Fatalf("a server alive was started %d times", n)
	}
	killed := time.Now()
	f.kill()
	for {
		if n, _ := f.counts(); n == 1 {
			break
		}
		if time.Since(killed) > 2*time.Second {
			t.Fatal("the server was not started again within 2s of its death")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("started again %s after it died", time.Since(killed).Round(time.Millisecond))
	time.Sleep(3 * serverCheckEvery)
	if n, _ := f.counts(); n != 1 {
		t.Errorf("started %d times after one death", n)
	}
	sigs <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	done <- nil
}

// Ensure a daemon whose local server can be waited on does not look at it
// while it runs, and still starts it again within 2s of its death.
func TestDaemon_LocalServerAwaited(t *testing.T) {
	t.Parallel()
	f := &fakeServer{deaths: make(chan struct{}, 1)}
	startWithServer(t, memlease.New(), "", f.server(false))
	time.Sleep(1500 * time.Millisecond)
	f.mu.Lock()
	looks := f.looks
	f.mu.Unlock()
	if looks > 1 {
		t.Errorf("the daemon looked at a live server it can wait on %d times in 1.5s", looks)
	}
	killed := time.Now()
	f.kill()
	for {
		if n, _ := f.counts(); n == 1 {
			break
		}
		if time.Since(killed) > 2*time.Second {
			t.Fatal("the server was not started again within 2s of its death")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure a daemon that owns its local server stops it after the drain: a
// child that takes its time over SIGTERM has exited and its run is
// settled when Stop is called, and Run returns only after Stop.
func TestDaemon_LocalServerStoppedAfterDrain(t *testing.T) {
	t.Parallel()
	q := memlease.New()
	dir := t.TempDir()
	agent := filepath.Join(dir, "slow.sh")
	mark := filepath.Join(dir, "finished")
	script := "#!/bin/sh\ntrap 'sleep 1; touch " + mark + "; exit 0' TERM\nwhile :; do sleep 0.05; done\n"
	if err := os.WriteFile(agent, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	id, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: "l", Agent: "slow", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{}
	var atStop struct {
		childDone bool
		task      lease.TaskState
	}
	f.onStop = func() {
		_, err := os.Stat(mark)
		atStop.childDone = err == nil
		task, _ := q.Task(ctx, id)
		atStop.task = task.State
	}
	sigs, done := startWithServer(t, q, `agent "slow" {
  command  = ["`+agent+`"]
  schedule = "@every 1s"
  lanes    = ["l"]
}`, f.server(true))
	for deadline := time.Now().Add(10 * time.Second); ; {
		if task, _ := q.Task(ctx, id); task.State == lease.TaskRunning {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the child sets its trap
	sigs <- syscall.SIGTERM
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	returned := time.Now()
	done <- nil
	_, stopped := f.counts()
	switch {
	case stopped.IsZero():
		t.Fatal("the local server was not stopped")
	case stopped.After(returned):
		t.Error("Run returned before the local server was stopped")
	case !atStop.childDone:
		t.Error("the local server was stopped before the child had finished")
	case atStop.task != lease.TaskDone:
		t.Errorf("at the stop the task was %s, want done (its run settled)", atStop.task)
	}
}
