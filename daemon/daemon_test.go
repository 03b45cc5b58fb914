package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
	"github.com/qd-run/qd/supervisor"
)

// testDaemon is a daemon running in the test's process against a queue in
// memory, with its config in a file and its signals from the test.
type testDaemon struct {
	t    *testing.T
	dir  string
	conf string // the config file
	sigs chan os.Signal
	done chan error
	api  api.Client
}

// MustStart writes body (agent blocks) into a config named name, starts Run
// on it with queue, and waits until its socket answers.
// backendOf is p as backend.Open would hand it out: with each ability of
// lease.Backend that p has.
func backendOf(p lease.Provider) *lease.Backend {
	b := &lease.Backend{Provider: p}
	b.Names, _ = p.(lease.NameRegistry)
	b.Server, _ = p.(lease.ServerWatch)
	b.Unserved, _ = p.(lease.UnservedCounter)
	b.Txs, _ = p.(lease.TxCounter)
	b.Schema, _ = p.(lease.SchemaManager)
	return b
}

func MustStart(t *testing.T, queue lease.Provider, name, dir, body string) *testDaemon {
	t.Helper()
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "qdd-"); err != nil { // short: a socket path
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	td := &testDaemon{t: t, dir: dir, conf: filepath.Join(dir, "qd.hcl"), sigs: make(chan os.Signal, 4),
		done: make(chan error, 1), api: api.Client{Path: filepath.Join(dir, "qd.sock")}}
	td.write(name, body)
	conf, err := config.Load(td.conf)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		td.done <- Run(context.Background(), Options{Config: conf, Queue: backendOf(queue), Stderr: testWriter{t},
			Version: "test", Signals: td.sigs})
	}()
	t.Cleanup(td.stop)
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := td.status(); err == nil {
			return td
		}
		select {
		case err := <-td.done:
			td.done <- err
			t.Fatalf("daemon exited at start: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("daemon socket did not answer within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (td *testDaemon) write(name, body string) {
	td.t.Helper()
	text := fmt.Sprintf("name = %q\nsocket = %q\nstate_dir = %q\nshutdown_grace = \"2s\"\n%s\n",
		name, td.api.Path, filepath.Join(td.dir, "state"), body)
	if err := os.WriteFile(td.conf, []byte(text), 0o600); err != nil {
		td.t.Fatal(err)
	}
}

func (td *testDaemon) status() (*api.Snapshot, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return td.api.Status(ctx)
}

// reload rewrites the config and sends SIGHUP.
func (td *testDaemon) reload(name, body string) {
	td.write(name, body)
	td.sigs <- syscall.SIGHUP
}

// stop sends SIGTERM and waits for Run to return.
func (td *testDaemon) stop() {
	select {
	case td.sigs <- syscall.SIGTERM:
	default:
	}
	select {
	case err := <-td.done:
		if err != nil {
			td.t.Errorf("Run returned %v", err)
		}
		td.done <- nil
	case <-time.After(20 * time.Second):
		td.t.Error("daemon did not stop within 20s of SIGTERM")
	}
}

// waitStatus polls the status until ok accepts it.
func (td *testDaemon) waitStatus(what string, ok func(*api.Snapshot) bool) *api.Snapshot {
	td.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; {
		s, err := td.status()
		if err == nil && ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			td.t.Fatalf("status never showed %s; last: %+v %v", what, s, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func snapAgents(s *api.Snapshot) string {
	var names []string
	for _, a := range s.Agents {
		names = append(names, a.Name)
	}
	return strings.Join(names, ",")
}

func agent(name, schedule, command string) string {
	return fmt.Sprintf("agent %q {\n  command = [%q]\n  schedule = %q\n}\n", name, command, schedule)
}

// Ensure SIGHUP applies a valid config at once (agents added), keeps the
// running config and reports the error on an invalid one, and leaves a
// setting that needs a restart (the name) as it was.
func TestDaemon_Reload(t *testing.T) {
	td := MustStart(t, memlease.New(), "d1", "", agent("a", "@every 1h", "/bin/true"))
	td.waitStatus("agent a", func(s *api.Snapshot) bool { return snapAgents(s) == "a" })

	td.reload("d1", agent("a", "@every 1h", "/bin/true")+agent("b", "@every 1h", "/bin/true"))
	td.waitStatus("agents a and b", func(s *api.Snapshot) bool { return snapAgents(s) == "a,b" && s.ConfigError == "" })

	td.write("d1", agent("a", "@every 1h", "/bin/true")+"agent \"c\" {\n  command = [\"/bin/true\"]\n  schedul = \"@every 1h\"\n}\n")
	td.sigs <- syscall.SIGHUP
	s := td.waitStatus("the reload error", func(s *api.Snapshot) bool { return s.ConfigError != "" })
	if snapAgents(s) != "a,b" || !strings.Contains(s.ConfigError, "schedul") {
		t.Errorf("after an invalid reload: agents %q, error %q; want a,b kept and the error naming the bad field", snapAgents(s), s.ConfigError)
	}

	td.reload("renamed", agent("a", "@every 1h", "/bin/true"))
	s = td.waitStatus("agent a alone", func(s *api.Snapshot) bool { return snapAgents(s) == "a" && s.ConfigError == "" })
	if s.Supervisor != "d1" {
		t.Errorf("after a reload that renames the daemon: supervisor %q, want d1 until a restart", s.Supervisor)
	}
}

// gatedQueue holds the first ClaimMany until the test opens the gate.
type gatedQueue struct {
	*memlease.Provider
	once    sync.Once
	entered chan struct{}
	gate    chan struct{}
}

func (g *gatedQueue) ClaimMany(ctx context.Context, p lease.ClaimParams, n int) ([]*lease.Lease, error) {
	first := false
	g.once.Do(func() { first = true })
	if first {
		close(g.entered)
		<-g.gate
	}
	return g.Provider.ClaimMany(ctx, p, n)
}

// Ensure a run claimed for an agent that a reload removed while the claim
// was in flight is given back: never started, abandoned with a summary
// that says why, its attempt refunded.
func TestDaemon_ReloadRemovesAgentMidClaim(t *testing.T) {
	q := &gatedQueue{Provider: memlease.New(), entered: make(chan struct{}), gate: make(chan struct{})}
	ctx := context.Background()
	id, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: "l", Agent: "a", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "ran")
	script := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	td := MustStart(t, q, "d1", "", agent("a", "@every 1s", script))
	select {
	case <-q.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("no claim within 10s")
	}
	td.reload("d1", agent("other", "@every 1h", "/bin/true"))
	td.waitStatus("agent a removed", func(s *api.Snapshot) bool { return snapAgents(s) == "other" })
	close(q.gate)
	var run lease.Run
	for deadline := time.Now().Add(10 * time.Second); ; {
		runs, err := q.Runs(ctx, lease.RunFilter{TaskID: id})
		if err == nil && len(runs) == 1 && runs[0].State != lease.RunRunning {
			run = runs[0]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the run of the removed agent was not settled: %+v %v", runs, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if run.State != lease.RunAbandoned || !strings.Contains(run.Summary, "no longer in the config") {
		t.Errorf("run of the removed agent: %s %q, want abandoned, no longer in the config", run.State, run.Summary)
	}
	if task, _ := q.Task(ctx, id); task.State != lease.TaskQueued || task.Attempts != 0 {
		t.Errorf("task: %s with %d attempts, want queued with the attempt refunded", task.State, task.Attempts)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the removed agent's command ran")
	}
}

// Ensure the give-back of a removed agent's run reports a refusal of that
// run (its lease already lost) instead of hiding it.
func TestRunner_RefundRefused(t *testing.T) {
	q := memlease.New()
	ctx := context.Background()
	if _, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: "l", Agent: "gone", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	l, err := q.Claim(ctx, lease.ClaimParams{Lanes: []string{"l"}, Owner: "d1", Instance: "i", Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	// Another holder of the lease settled it first.
	if errs, err := q.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "done elsewhere"}); err != nil || errs[0] != nil {
		t.Fatal(err, errs)
	}
	sup, err := supervisor.New(supervisor.Config{Provider: q, Logger: hclog.NewNullLogger(), StateDir: t.TempDir(), Owner: "d1", Instance: "i"})
	if err != nil {
		t.Fatal(err)
	}
	d := &daemon{queue: q, conf: config.Default(), sup: sup}
	err = runner{d}.Start("gone", l, time.Now())
	if !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("refund of a run whose lease is lost: got %v, want ErrLeaseLost", err)
	}
}

// Ensure a restart abandons at once the runs of the incarnations recorded
// in its state directory, and only those: a live run of another daemon
// with the same name stays. A second daemon on the same state directory is
// refused.
func TestDaemon_RestartAbandonsEarlier(t *testing.T) {
	q := memlease.New()
	ctx := context.Background()
	claim := func(lane, instance string) *lease.Lease {
		t.Helper()
		if _, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: lane, Agent: "x", Payload: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		l, err := q.Claim(ctx, lease.ClaimParams{Lanes: []string{lane}, Owner: "d1", Instance: instance, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	mine, twin := claim("l1", "old"), claim("l2", "twin")
	dir, err := os.MkdirTemp("", "qdd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	state := filepath.Join(dir, "state")
	os.MkdirAll(state, 0o700)
	if err := os.WriteFile(filepath.Join(state, "incarnations"), []byte("d1 old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	MustStart(t, q, "d1", dir, "")
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, _ := q.Run(ctx, mine.RunID)
		if r.State == lease.RunAbandoned {
			if r.Summary != "supervisor restarted" {
				t.Errorf("abandoned run's summary %q", r.Summary)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the earlier incarnation's run is still %s", r.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r, _ := q.Run(ctx, twin.RunID); r.State != lease.RunRunning {
		t.Errorf("the same-name twin's live run is %s, want running", r.State)
	}
	// The list is rewritten once the abandon has returned: wait for it.
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, _ := os.ReadFile(filepath.Join(state, "incarnations"))
		lines := strings.Fields(string(b))
		if len(lines) == 2 && lines[0] == "d1" && lines[1] != "old" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("incarnations after the restart: %q, want this daemon's alone", b)
		}
		time.Sleep(20 * time.Millisecond)
	}

	conf, err := config.Load(filepath.Join(dir, "qd.hcl"))
	if err != nil {
		t.Fatal(err)
	}
	conf.Socket = filepath.Join(dir, "other.sock")
	err = Run(ctx, Options{Config: conf, Queue: backendOf(q), Stderr: testWriter{t}, Signals: make(chan os.Signal)})
	if err == nil || !strings.Contains(err.Error(), "is in use by another qd daemon") {
		t.Errorf("second daemon on the same state directory: got %v, want refused", err)
	}
}

// Ensure the config's lane blocks are applied at start and again on
// reload, winning over a `qd lane set` made meanwhile, and that a lane the
// config does not name is left as it was.
func TestDaemon_LaneBlocks(t *testing.T) {
	q := memlease.New()
	ctx := context.Background()
	lanes := "lane \"wide\" {\n  max_running = 3\n}\nlane \"held\" {\n  paused = true\n}\n"
	td := MustStart(t, q, "d1", "", lanes)
	lane := func(name string) lease.Lane {
		t.Helper()
		ls, err := q.Lanes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range ls {
			if l.Name == name {
				return l
			}
		}
		return lease.Lane{}
	}
	waitLane := func(name string, ok func(lease.Lane) bool) lease.Lane {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; {
			if l := lane(name); ok(l) {
				return l
			}
			if time.Now().After(deadline) {
				t.Fatalf("lane %s never as wanted: %+v", name, lane(name))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	l := waitLane("wide", func(l lease.Lane) bool { return l.MaxRunning == 3 })
	if !strings.HasPrefix(l.SetBy, "config "+td.conf) {
		t.Errorf("lane set from the config says it was set by %q", l.SetBy)
	}
	waitLane("held", func(l lease.Lane) bool { return l.Paused })

	one, two := 1, 2
	for _, u := range []lease.LaneUpdate{{Name: "wide", MaxRunning: &one, SetBy: "qd lane set"}, {Name: "other", MaxRunning: &two, SetBy: "qd lane set"}} {
		if _, err := q.SetLane(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	td.reload("d1", lanes)
	waitLane("wide", func(l lease.Lane) bool { return l.MaxRunning == 3 && strings.HasPrefix(l.SetBy, "config ") })
	if l := lane("other"); l.MaxRunning != 2 || l.SetBy != "qd lane set" {
		t.Errorf("lane the config does not name: %+v, want left at 2 by qd lane set", l)
	}
}

// Ensure a periodic schedule whose last task still waits (its lane paused)
// enqueues nothing more with overlap "skip", the default, and one a tick
// with overlap "queue".
func TestDaemon_PeriodicOverlap(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		overlap string
		many    bool
	}{{"", false}, {"skip", false}, {"queue", true}} {
		t.Run("Overlap"+tt.overlap, func(t *testing.T) {
			q := memlease.New()
			paused := true
			if _, err := q.SetLane(ctx, lease.LaneUpdate{Name: "held", Paused: &paused}); err != nil {
				t.Fatal(err)
			}
			overlap := ""
			if tt.overlap != "" {
				overlap = fmt.Sprintf("\n  overlap  = %q", tt.overlap)
			}
			td := MustStart(t, q, "overlap", "", agent("w", "@every 1h", "/bin/true")+fmt.Sprintf(`
periodic "tick" {
  schedule = "@every 1s"
  agent    = "w"
  lane     = "held"%s
}`, overlap))
			time.Sleep(3500 * time.Millisecond)
			td.stop()
			ts, err := q.Tasks(ctx, lease.TaskFilter{Lane: "held"})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case !tt.many && len(ts) != 1:
				t.Errorf("overlap %q: %d tasks after 3 ticks in a paused lane, want 1", tt.overlap, len(ts))
			case tt.many && len(ts) < 3:
				t.Errorf("overlap %q: %d tasks after 3 ticks in a paused lane, want one a tick", tt.overlap, len(ts))
			}
		})
	}
}

// Ensure an agent's timetable runs it: a task at each tick, claimed at
// once by the daemon that enqueued it.
func TestDaemon_Timetable(t *testing.T) {
	q := memlease.New()
	td := MustStart(t, q, "timetable", "", `agent "w" {
  command   = ["/bin/true"]
  timetable = "@every 1s"
}`)
	td.waitStatus("a run of the timetable", func(s *api.Snapshot) bool {
		return len(s.Agents) == 1 && s.Agents[0].Last != nil && s.Agents[0].Last.Outcome == lease.RunCompleted
	})
}
