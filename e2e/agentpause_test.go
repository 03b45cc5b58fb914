package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure `qd agent pause` holds a running daemon's claims of that agent (a
// task enqueued meanwhile waits through several ticks), lets the run that
// was live finish, shows in `qd status`, and that `qd agent resume` lets
// the waiting task run.
func TestAgent_PauseHoldsTheDaemon(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	d := testkit.StartDaemon(t, qd, db, "pause", nowAgent("w", startMarker(t, dir, "1.5"), "@every 1s"), testkit.DaemonOptions{})
	live := enqueue(t, qd, db, "p", "w")
	startedAt(t, dir, live, 20*time.Second)

	testkit.MustQD(t, qd, db, "agent", "pause", "w")
	waiting := enqueue(t, qd, db, "p", "w")
	waitShow(t, qd, db, live, 20*time.Second, "the live run to finish while its agent is paused", func(s shown) bool { return s.Task.State == "done" })
	time.Sleep(3 * time.Second) // three ticks of the agent
	if s := showTask(t, qd, db, waiting); s.Task.State != "queued" || len(s.Runs) != 0 {
		t.Fatalf("task %s of the paused agent: %s with %d runs, want queued and never claimed", waiting, s.Task.State, len(s.Runs))
	}
	st := d.Status(t)
	if len(st.Agents) != 1 || st.Agents[0].Paused == nil || st.Agents[0].Paused.SetBy != "qd agent pause" {
		t.Errorf("qd status --json does not say agent w is paused by qd agent pause: %+v", st.Agents)
	}
	if out := testkit.MustQD(t, qd, db, "status", "--config", d.Config); !strings.Contains(out, "PAUSED") {
		t.Errorf("qd status does not show the pause:\n%s", out)
	}

	testkit.MustQD(t, qd, db, "agent", "resume", "w")
	waitShow(t, qd, db, waiting, 20*time.Second, "the resumed agent's task to run", func(s shown) bool { return s.Task.State == "done" })
	if st := d.Status(t); st.Agents[0].Paused != nil {
		t.Errorf("qd status still says agent w is paused after resume: %+v", st.Agents[0].Paused)
	}
}

// Ensure `qd agent resume` on the daemon's host wakes it: a task of an
// hourly agent, enqueued while the agent was paused, runs within seconds
// of the resume rather than at the next tick.
func TestAgent_ResumeWakesTheDaemon(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	d := testkit.StartDaemon(t, qd, db, "resume", nowAgent("hourly", startMarker(t, dir, "0.1"), "@hourly"), testkit.DaemonOptions{})
	testkit.MustQD(t, qd, db, "agent", "pause", "hourly")
	id := testkit.MustQD(t, qd, db, "enqueue", "--config", d.Config, "--lane", "r", "--agent", "hourly", "{}")
	time.Sleep(2 * time.Second) // the enqueue woke the daemon, which claimed nothing
	if s := showTask(t, qd, db, id); s.Task.State != "queued" {
		t.Fatalf("task %s of the paused agent is %s, want queued", id, s.Task.State)
	}
	resumed := time.Now()
	testkit.MustQD(t, qd, db, "agent", "resume", "--config", d.Config, "hourly")
	started := startedAt(t, dir, id, 15*time.Second)
	t.Logf("task %s started %s after the resume", id, started.Sub(resumed).Round(time.Millisecond))
}
