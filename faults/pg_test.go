package faults

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/pg"
)

// Ensure that when every connection of a daemon drops and the database
// refuses it for a few seconds (a server restart, seen from one daemon,
// shorter than the lease), no agent whose lease was good is killed,
// heartbeats resume and every task completes once.
func TestPG_RestartWhileRunning(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	outages := 1
	if *soak {
		outages = 3
	}
	var ids []int64
	for i := range 3 {
		// Runs last through every outage and a little after.
		ms := 8000 + outages*6000
		ids = append(ids, r.enqueue(fmt.Sprintf("pgr%d", i), "w", fmt.Sprintf(`{"mode":"sleep","ms":%d}`, ms), 3))
	}
	body := r.agentHCL(agentConf{name: "w", parallel: 3, lease: "8s", heartbeat: "1s"})
	d := r.daemon("restart", body, testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	for _, id := range ids {
		r.waitEvent("start", id, 20*time.Second)
	}
	time.Sleep(1500 * time.Millisecond)
	for range outages {
		px.Refuse()
		fig.fault("pg-restart", 1)
		time.Sleep(3 * time.Second)
		end := r.dbNow()
		px.Restore()
		t.Logf("first heartbeat %s after the outage", r.waitRecovery("restart", end, 10*time.Second))
		time.Sleep(2 * time.Second)
	}
	r.verify(expect{})
	var runs int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	if runs != len(ids) {
		t.Errorf("%d runs for %d tasks: an agent was killed or re-run although its lease was good\n%s", runs, len(ids), d.Log())
	}
}

// Ensure a claim whose connection is terminated (pg_terminate_backend)
// while it waits inside its transaction leaves no trace: no run, no attempt
// spent, and the daemon claims the task again and completes it.
func TestPG_ClaimBackendTerminated(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("term", "w", `{"mode":"sleep","ms":200}`, 3)
	ctx := context.Background()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // released below
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SELECT pg_advisory_xact_lock(%d, %s.lane_key('term'))`, pg.LaneLockSpace, r.schema)); err != nil {
		t.Fatalf("hold the lane lock: %v", err)
	}
	d := r.daemon("term", r.agentHCL(agentConf{name: "w"}), testkit.DaemonOptions{})
	var killed bool
	testkit.Eventually(t, 20*time.Second, "the daemon's claim to wait on the lane lock", func() bool {
		r.scalar(&killed, `SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity
			WHERE application_name = 'qd' AND wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%claim%'`, r.schema)
		return killed
	})
	fig.fault("conn-kill", 1)
	var runs, attempts int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
	if runs != 0 || attempts != 0 {
		t.Errorf("after the claim's backend was terminated: %d runs, %d attempts; want none", runs, attempts)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	r.verify(expect{})
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
	if attempts != 1 {
		t.Errorf("task %d took %d attempts, want 1: the terminated claim must not count", id, attempts)
	}
	if d.Exited() {
		t.Errorf("daemon exited after its connection was terminated")
	}
}

// Ensure a completion whose COMMIT reply is lost is retried and found
// already done: the task is done once, by one run, never run again.
func TestPG_CompletionCommitReplyLost(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("sc", "w", `{"mode":"sleep","ms":2500}`, 3)
	d := r.daemon("settlecut", r.agentHCL(agentConf{name: "w", lease: "20s", heartbeat: "5s"}), testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	run, _ := r.waitEvent("start", id, 20*time.Second)
	cut := px.LoseCommitAfter(string(settleRow(run)))
	waitLostCommit(t, cut, d, "the completion's")
	d.WaitLog(t, "settle runs", 10*time.Second)
	r.verify(expect{})
	if runs := r.runsOf(id); runs != 1 {
		t.Errorf("task %d: %d runs after a lost completion reply, want 1", id, runs)
	}
	d.WaitLog(t, "run settled", 5*time.Second)
}

// waitLostCommit waits until the proxy has lost whose COMMIT reply ("the
// claim's") on cut, and counts the fault.
func waitLostCommit(t *testing.T, cut <-chan struct{}, d *testkit.Daemon, whose string) {
	t.Helper()
	select {
	case <-cut:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s COMMIT reply was never seen\n%s", whose, d.Log())
	}
	fig.fault("lost-commit", 1)
}

// settleRow is the start of the data row settle() answers for run: its id
// (binary int8) and status "ok".
func settleRow(run int64) []byte {
	b := []byte{0, 2, 0, 0, 0, 8}
	b = binary.BigEndian.AppendUint64(b, uint64(run))
	return append(b, 0, 0, 0, 2, 'o', 'k')
}

// Ensure an outage that ends well before a run's local deadline never
// kills its agent, however the heartbeat retries were spaced during it: the
// first heartbeat after the database is back must come before the
// deadline.
func TestPG_OutageEndsBeforeDeadline(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("blip", "w", `{"mode":"sleep","ms":15000}`, 3)
	// lease 6s, heartbeat 2s: the child is killed 4.5s after the last
	// heartbeat that got through.
	r.daemon("blip", r.agentHCL(agentConf{name: "w", lease: "6s", heartbeat: "2s"}), testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	run, _ := r.waitEvent("start", id, 20*time.Second)
	var first time.Time
	r.scalar(&first, `SELECT last_heartbeat_at FROM {s}.runs WHERE id = $1`, run)
	testkit.Eventually(t, 10*time.Second, "a heartbeat", func() bool {
		var hb time.Time
		r.scalar(&hb, `SELECT last_heartbeat_at FROM {s}.runs WHERE id = $1`, run)
		return hb.After(first)
	})
	px.Refuse()
	fig.fault("pg-restart", 1)
	time.Sleep(3600 * time.Millisecond) // back 0.9s before the local deadline
	end := r.dbNow()
	px.Restore()
	t.Logf("first heartbeat %s after the outage", r.waitRecovery("blip", end, 10*time.Second))
	r.verify(expect{})
	var runs int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	if runs != 1 {
		t.Errorf("%d runs: the agent was killed although the database came back before its deadline", runs)
	}
}

// Ensure a database out of reach is said once in the daemon's log, not at
// every failed claim, heartbeat, settlement and renewal, and that its
// return is said too: three agents ticking every second and a child whose
// heartbeats fail make dozens of failed calls in the 12 s here.
func TestPG_OutageLoggedOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("quiet", "w", `{"mode":"sleep","ms":8000}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "6s", heartbeat: "1s"}) +
		r.agentHCL(agentConf{name: "x"}) + r.agentHCL(agentConf{name: "y"})
	d := r.daemon("quiet", body, testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	r.waitEvent("start", id, 20*time.Second)
	before := len(strings.Split(d.Log(), "\n"))
	px.Refuse()
	fig.fault("pg-outage", 1)
	time.Sleep(12 * time.Second)
	px.Restore()
	d.WaitLog(t, "the database answers again", 20*time.Second)
	lines := strings.Split(d.Log(), "\n")[before-1:]
	var said []string
	for _, l := range lines {
		warned := strings.Contains(l, "[WARN]") || strings.Contains(l, "[ERROR]")
		if warned && (strings.Contains(l, "database unreachable") || strings.Contains(l, "connection refused")) {
			said = append(said, l)
		}
	}
	if len(said) != 1 {
		t.Errorf("the outage was said %d times in the log, want once (then once every 30 s):\n%s", len(said), strings.Join(said, "\n"))
	}
	r.verify(expect{})
}
