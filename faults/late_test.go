package faults

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a child that exits 0 while the database is out of reach, and
// stays so past the run's lease, is not run again: the daemon keeps the
// completion, claims nothing meanwhile, and settles it when the database
// answers; no other run was claimed, so the late completion is taken and
// the task is done by its one run.
func TestLate_CompletionDuringOutage(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("late", "w", `{"mode":"sleep","ms":1200}`, 3)
	d := r.daemon("late", r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"}), testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	r.waitEvent("start", id, 20*time.Second)
	px.Refuse()
	fig.fault("late-completion-outage", 1)
	r.waitEvent("end", id, 10*time.Second) // the child exits 0 during the outage
	time.Sleep(5 * time.Second)            // past the lease
	px.Restore()
	r.verify(expect{})
	if runs := r.runsOf(id); runs != 1 {
		t.Errorf("task %d: %d runs, want its one run: finished work was done again", id, runs)
	}
	var state, summary string
	r.scalar(&state, `SELECT state FROM {s}.runs WHERE task_id = $1`, id)
	r.scalar(&summary, `SELECT summary FROM {s}.runs WHERE task_id = $1`, id)
	if state != "completed" {
		t.Errorf("the run is %s %q, want completed, settled late", state, summary)
	}
	if !strings.Contains(d.Log(), "its completion is kept and settled when it answers") {
		t.Errorf("the daemon did not say it kept the completion past the lease:\n%s", d.Log())
	}
}

// Ensure a late completion is refused, as today, once another run of the
// task was claimed after the lease ran out: that run's outcome stands,
// and nothing of the late one is written over it.
func TestLate_RefusedOnceAnotherRunExists(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("late2", "w", `{"mode":"sleep","ms":1200}`, 3)
	d := r.daemon("late2", r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"}), testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	first, _ := r.waitEvent("start", id, 20*time.Second)
	px.Refuse()
	fig.fault("late-completion-outage", 1)
	r.waitEvent("end", id, 10*time.Second)
	time.Sleep(4 * time.Second) // past the lease
	// Another claimer reaps the run and takes the task, then completes it.
	out := testkit.MustQD(t, r.qd, r.url, "claim", "--lane", "late2", "--owner", "other", "--lease", "1m")
	if !strings.Contains(out, `"task_id": `) && !strings.Contains(out, `"task_id":`) {
		t.Fatalf("qd claim took nothing: %s", out)
	}
	var second int64
	r.scalar(&second, `SELECT max(id) FROM {s}.runs WHERE task_id = $1`, id)
	testkit.MustQD(t, r.qd, r.url, "complete", strconv.FormatInt(second, 10), "--summary", "done by the other")
	px.Restore()
	d.WaitLog(t, "settle run", 20*time.Second)
	r.verify(expect{})
	var state, summary string
	r.scalar(&state, `SELECT state FROM {s}.runs WHERE id = $1`, first)
	r.scalar(&summary, `SELECT summary FROM {s}.runs WHERE id = $1`, second)
	if state != "abandoned" || summary != "done by the other" {
		t.Errorf("first run %s, second's summary %q: want the first left abandoned and the second's outcome standing", state, summary)
	}
}

// Ensure a daemon paused past its run's lease (a laptop asleep, SIGSTOP
// here) while its child finished, with no other daemon to take the task,
// sends the child's completion when it wakes rather than fencing the run
// into an abandon: the task is done by its one run, not run again.
func TestLate_PausedDaemonAloneCompletes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("asleep", "w", `{"mode":"sleep","ms":1500}`, 3)
	d := r.daemon("asleep", r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"}), testkit.DaemonOptions{})
	r.waitEvent("start", id, 20*time.Second)
	d.Signal(syscall.SIGSTOP)
	fig.fault("sigstop", 1)
	r.waitEvent("end", id, 10*time.Second) // the child finishes while its daemon sleeps
	time.Sleep(4 * time.Second)            // past the lease
	d.Signal(syscall.SIGCONT)
	r.waitStates("done", nil, 20*time.Second)
	r.verify(expect{})
	if runs := r.runsOf(id); runs != 1 {
		t.Errorf("task %d: %d runs, want its one run: finished work was done again", id, runs)
	}
	var state string
	r.scalar(&state, `SELECT state FROM {s}.runs WHERE task_id = $1`, id)
	if state != "completed" {
		t.Errorf("the run is %s, want completed, settled late after the pause:\n%s", state, d.Log())
	}
}
