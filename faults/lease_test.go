package faults

import (
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// reportedOverlap reads the overlap window a daemon logged when it found
// its lease over on waking up.
func reportedOverlap(t *testing.T, log string) time.Duration {
	t.Helper()
	_, rest, ok := strings.Cut(log, "overlap_up_to=")
	if !ok {
		t.Fatalf("no overlap_up_to in the log:\n%s", log)
	}
	d, err := time.ParseDuration(strings.Fields(rest)[0])
	if err != nil {
		t.Fatalf("overlap_up_to: %v", err)
	}
	return d
}

// leaseLostLines counts the refusals a daemon logged: heartbeats and
// settlements fenced off because the run was no longer live.
func leaseLostLines(d *testkit.Daemon) int {
	return strings.Count(d.Log(), "lease lost")
}

// Ensure a completion sent after the run was reaped and the task claimed
// again is refused with exit 4 and changes nothing, and that the newer run
// still completes the task.
func TestLease_LateCompletionAfterReap(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("late", "cli", `{}`, 3)
	claim := func(lease string) map[string]any {
		out := testkit.MustQD(t, r.qd, r.url, "claim", "--lane", "late", "--lease", lease, "--owner", "worker-a")
		var m map[string]any
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("claim output: %v\n%s", err, out)
		}
		return m
	}
	a := claim("1s")
	runA := fmt.Sprint(a["run_id"])
	time.Sleep(1500 * time.Millisecond) // A's lease runs out
	// B's lease outlives the checks below however slow a loaded machine
	// makes them: only A's may run out.
	b := claim("1m")
	runB := fmt.Sprint(b["run_id"])
	if runA == runB || fmt.Sprint(b["attempt"]) != "2" {
		t.Fatalf("second claim: run %s attempt %v, want a new run at attempt 2", runB, b["attempt"])
	}
	fig.fault("late-completion", 1)
	for _, verb := range []string{"complete", "fail", "heartbeat"} {
		_, errOut, code := testkit.QD(t, r.qd, r.url, verb, runA)
		if code != 4 {
			t.Errorf("qd %s of reaped run %s: exit %d, want 4 (lease lost): %s", verb, runA, code, errOut)
		} else {
			fig.add(func(f *figures) { f.staleRejected++ })
		}
	}
	var stateA, summaryA string
	r.scalar(&stateA, `SELECT state FROM {s}.runs WHERE id = $1`, a["run_id"])
	r.scalar(&summaryA, `SELECT summary FROM {s}.runs WHERE id = $1`, a["run_id"])
	if stateA != "abandoned" || !strings.HasPrefix(summaryA, "lease expired") {
		t.Errorf("reaped run: state %s summary %q, want abandoned by the reaper", stateA, summaryA)
	}
	var taskState string
	r.scalar(&taskState, `SELECT state FROM {s}.tasks WHERE id = $1`, id)
	if taskState != "running" {
		t.Errorf("task after the late completion: %s, want still running under run %s", taskState, runB)
	}
	testkit.MustQD(t, r.qd, r.url, "complete", runB)
	r.verify(expect{})
}

// Ensure a daemon cut off from the database (its network blackholed, the
// server still up for everyone else) kills its child before the lease runs
// out, that another daemon runs the task again exactly once after the lease
// expired, and that the status socket keeps answering during the outage.
func TestLease_UnreachableSelfFences(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("fence", "w", `{"mode":"sleep","ms_by_attempt":[60000,1000]}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "4s", heartbeat: "1s"})
	a := r.daemon("fence-a", body, testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	runA, pidA := r.waitEvent("start", id, 20*time.Second)
	time.Sleep(1500 * time.Millisecond) // a heartbeat or two got through
	px.Blackhole()
	cutAt := time.Now()
	fig.fault("partition", 1)
	b := r.daemon("fence-b", body, testkit.DaemonOptions{})
	a.WaitLog(t, "no heartbeat got through; killed the child", 10*time.Second)
	if s := a.Status(t); s.Database.Reachable {
		t.Errorf("status during the outage says the database is reachable")
	}
	testkit.Eventually(t, 5*time.Second, "the fenced child to be gone", func() bool { return !testkit.Alive(pidA) })
	var last, expires time.Time
	r.scalar(&last, `SELECT max(at) FROM {s}.audit WHERE run_id = $1`, runA)
	r.scalar(&expires, `SELECT lease_expires_at FROM {s}.runs WHERE id = $1`, runA)
	if !last.Add(tickSlack).Before(expires) {
		t.Errorf("child of run %d lived until %s, its lease expired at %s: not fenced in time", runA, last, expires)
	}
	r.waitStates("done", nil, 40*time.Second)
	time.Sleep(max(0, 8*time.Second-time.Since(cutAt))) // outage longer than the lease
	runs := r.runsOf(id)
	var attempts int
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
	if runs != 2 || attempts != 2 {
		t.Errorf("task %d: %d runs, %d attempts; want one re-run (2 and 2)", id, runs, attempts)
	}
	// Back on the network, A claims again: fault end to its first write.
	b.Signal(syscall.SIGTERM)
	b.Wait(t, 20*time.Second)
	end := r.dbNow()
	px.Restore()
	r.enqueue("fence", "w", `{"mode":"sleep","ms":100}`, 3)
	t.Logf("first claim %s after the network came back", r.waitRecovery("fence-a", end, 20*time.Second))
	r.verify(expect{})
}

// Ensure a daemon stopped (SIGSTOP) for three leases and then continued
// kills its stale child at once, that the other daemon's run of the task is
// untouched, and that the window in which both children ran is measured
// and reported.
func TestLease_PausedDaemon(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, runA, pidA := r.pauseDuringRun("pause", 60000)
	time.Sleep(2 * time.Second)
	contAt := r.dbNow()
	a.Signal(syscall.SIGCONT)
	testkit.Eventually(t, 5*time.Second, "the stale child to be killed after SIGCONT", func() bool { return !testkit.Alive(pidA) })
	a.WaitLog(t, "another run of the task may have overlapped", 5*time.Second)
	reported := reportedOverlap(t, a.Log())
	var last time.Time
	r.scalar(&last, `SELECT max(at) FROM {s}.audit WHERE run_id = $1`, runA)
	if d := last.Sub(contAt); d > 2*time.Second {
		t.Errorf("stale child of run %d still ran %s after SIGCONT", runA, d)
	}
	r.verify(expect{pause: true})
	n, longest, _ := overlaps(r.spans())
	t.Logf("paused-daemon overlap: measured %s, reported up to %s", longest.Round(time.Millisecond), reported)
	if n != 1 || longest <= 0 {
		t.Errorf("the paused daemon's child ran on while the task ran elsewhere, but %d overlaps were measured", n)
	}
	if longest > reported+tickSlack {
		t.Errorf("measured overlap %s is longer than the %s the daemon reported", longest, reported)
	}
	if st := r.runState(runA); st != "abandoned" {
		t.Errorf("paused daemon's run %d is %s, want abandoned", runA, st)
	}
}

// Ensure that when the child of a paused daemon finishes during the pause,
// the daemon's completion after SIGCONT is refused (the task was reaped and
// run again meanwhile) and the newer run's result stands.
func TestLease_PausedDaemonLateCompletion(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	a, runA, _ := r.pauseDuringRun("late", 5000)
	testkit.Eventually(t, 10*time.Second, "A's child to finish during the pause", func() bool {
		var n int
		r.scalar(&n, `SELECT count(*) FROM {s}.audit WHERE run_id = $1 AND event = 'end'`, runA)
		return n == 1
	})
	a.Signal(syscall.SIGCONT)
	a.WaitLog(t, "lease lost", 10*time.Second)
	fig.add(func(f *figures) { f.staleRejected += leaseLostLines(a) })
	if st := r.runState(runA); st != "abandoned" {
		t.Errorf("late run %d is %s after its completion arrived, want abandoned (the completion must be refused)", runA, st)
	}
	r.verify(expect{pause: true})
}

// pauseDuringRun enqueues a task on lane whose first attempt sleeps firstMS
// and its second one second, lets daemon <lane>-a start it, starts
// <lane>-b, and stops a with SIGSTOP until b has reaped a's run and
// finished the task. It returns a, the first run and its pid.
func (r *rig) pauseDuringRun(lane string, firstMS int) (*testkit.Daemon, int64, int) {
	r.t.Helper()
	id := r.enqueue(lane, "w", fmt.Sprintf(`{"mode":"sleep","ms_by_attempt":[%d,1000]}`, firstMS), 3)
	body := r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"})
	a := r.daemon(lane+"-a", body, testkit.DaemonOptions{})
	run, pid := r.waitEvent("start", id, 20*time.Second)
	r.daemon(lane+"-b", body, testkit.DaemonOptions{})
	a.Signal(syscall.SIGSTOP)
	fig.fault("sigstop", 1)
	r.waitStates("done", nil, 30*time.Second)
	return a, run, pid
}
