package faults

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure `qd cancel` of a running task stops the agent's whole process
// group, the backgrounded grandchild too, and the task ends cancelled.
func TestProc_CancelKillsGroup(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("cancel", "w", `{"mode":"grandchild","ms":60000}`, 3)
	r.daemon("cancel", r.agentHCL(agentConf{name: "w", extra: `kill_grace = "2s"`}), testkit.DaemonOptions{})
	_, gpid := r.waitEvent("spawn", id, 20*time.Second)
	_, apid := r.waitEvent("start", id, 5*time.Second)
	testkit.MustQD(t, r.qd, r.url, "cancel", strconv.FormatInt(id, 10))
	fig.fault("cancel", 1)
	testkit.Eventually(t, 8*time.Second, "agent and grandchild gone after cancel", func() bool {
		return !testkit.Alive(apid) && !testkit.Alive(gpid)
	})
	r.verify(expect{def: "cancelled"})
}

// Ensure a timeout kills an agent that ignores SIGTERM, and its grandchild,
// escalating to SIGKILL after kill_grace.
func TestProc_TimeoutKillsGroup(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("timeout", "w", `{"mode":"grandchild","ms":60000,"ignore_term":true}`, 1)
	d := r.daemon("timeout", r.agentHCL(agentConf{name: "w", extra: "timeout = \"2s\"\nkill_grace = \"1s\""}), testkit.DaemonOptions{})
	_, gpid := r.waitEvent("spawn", id, 20*time.Second)
	_, apid := r.waitEvent("start", id, 5*time.Second)
	fig.fault("timeout", 1)
	testkit.Eventually(t, 10*time.Second, "agent and grandchild gone after the timeout", func() bool {
		return !testkit.Alive(apid) && !testkit.Alive(gpid)
	})
	d.WaitLog(t, "escalated to SIGKILL", 5*time.Second)
	r.verify(expect{def: "failed"})
}

// Ensure an agent that exits 0 while a grandchild holds its output pipe
// does not hang its run: the run completes within the pipe grace and the
// grandchild is killed.
func TestProc_ExitZeroGrandchildHoldsPipe(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("pipe", "w", `{"mode":"pipehold","ms":0}`, 3)
	d := r.daemon("pipe", r.agentHCL(agentConf{name: "w"}), testkit.DaemonOptions{})
	_, gpid := r.waitEvent("spawn", id, 20*time.Second)
	fig.fault("pipe-holder", 1)
	r.waitStates("done", nil, 15*time.Second)
	testkit.Eventually(t, 5*time.Second, "the pipe-holding grandchild to be killed", func() bool { return !testkit.Alive(gpid) })
	var hung time.Duration
	var secs float64
	r.scalar(&secs, `SELECT extract(epoch FROM r.finished_at - (SELECT max(at) FROM {s}.audit a WHERE a.run_id = r.id AND a.event = 'end'))
		FROM {s}.runs r WHERE r.task_id = $1`, id)
	hung = time.Duration(secs * float64(time.Second))
	if hung > 6*time.Second {
		t.Errorf("run settled %s after its agent exited; the pipe holder stalled it", hung)
	}
	d.WaitLog(t, "a grandchild holds it", time.Second)
	r.verify(expect{})
}

// Ensure SIGTERM drains: no claim after the signal, an agent that finishes
// in the grace completes, one that stops on TERM and one that ignores it
// are released for another run, grandchildren die, and qd exits 0 within
// the grace and a margin.
func TestProc_DrainOnSIGTERM(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	quick := r.enqueue("d1", "w", `{"mode":"sleep","ms":2500}`, 3)
	finisher := r.enqueue("d2", "w", `{"mode":"sleep","ms":60000,"term_ms":500}`, 3)
	ignorer := r.enqueue("d3", "w", `{"mode":"sleep","ms":60000,"ignore_term":true}`, 3)
	forker := r.enqueue("d4", "w", `{"mode":"grandchild","ms":60000,"term_exit":143}`, 3)
	d := r.daemon("drain", r.agentHCL(agentConf{name: "w", parallel: 4}), testkit.DaemonOptions{})
	for _, id := range []int64{quick, finisher, ignorer, forker} {
		r.waitEvent("start", id, 20*time.Second)
	}
	r.waitEvent("spawn", forker, 5*time.Second)
	late := r.enqueue("d5", "w", `{"mode":"sleep","ms":100}`, 3)
	sigAt := r.dbNow()
	start := time.Now()
	d.Signal(syscall.SIGTERM)
	fig.fault("sigterm-drain", 1)
	code := d.Wait(t, 20*time.Second)
	took := time.Since(start)
	if code != 0 || took > 5*time.Second+6*time.Second {
		t.Errorf("drain: exit %d after %s; want 0 within the 5s grace and a margin", code, took)
	}
	var after int
	r.scalar(&after, `SELECT count(*) FROM {s}.runs WHERE started_at > $1`, sigAt)
	if after != 0 {
		t.Errorf("%d runs claimed after SIGTERM", after)
	}
	r.verify(expect{states: map[int64]string{ignorer: "queued", forker: "queued", late: "queued"}})
	var attempts int
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, ignorer)
	if attempts != 0 {
		t.Errorf("task %d killed by the drain kept %d attempts, want its attempt refunded", ignorer, attempts)
	}
}

// Ensure a second signal skips the grace: an agent that ignores SIGTERM is
// killed at once and qd exits promptly, its task released.
func TestProc_SecondSignal(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("twice", "w", `{"mode":"sleep","ms":60000,"ignore_term":true}`, 3)
	d := testkit.StartDaemon(t, r.qd, r.url, "twice", "shutdown_grace = \"60s\"\n"+r.agentHCL(agentConf{name: "w"}), testkit.DaemonOptions{})
	_, pid := r.waitEvent("start", id, 20*time.Second)
	d.Signal(syscall.SIGTERM)
	d.WaitLog(t, "draining", 5*time.Second)
	time.Sleep(time.Second)
	start := time.Now()
	d.Signal(syscall.SIGINT)
	fig.fault("second-signal", 1)
	d.Wait(t, 10*time.Second)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("qd took %s to exit after the second signal", took)
	}
	if testkit.Alive(pid) {
		t.Errorf("agent %d still alive after the second signal", pid)
	}
	r.verify(expect{def: "queued"})
}

// Ensure a drain while the database is unreachable still stops the agents
// and exits, logs that the runs could not be released, and that the task
// runs again exactly once after its lease expired.
func TestProc_DrainDatabaseDown(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	id := r.enqueue("dd", "w", `{"mode":"grandchild","ms_by_attempt":[60000,300],"term_exit":143}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "4s", heartbeat: "1s"})
	d := r.daemon("dbdown", body, testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	_, pid := r.waitEvent("start", id, 20*time.Second)
	px.Refuse()
	fig.fault("partition", 1)
	d.Signal(syscall.SIGTERM)
	fig.fault("sigterm-drain", 1)
	code := d.Wait(t, 20*time.Second)
	t.Logf("qd exit code after a drain with the database down: %d", code)
	if testkit.Alive(pid) {
		t.Errorf("agent %d outlived the drain", pid)
	}
	if !containsAny(d.Log(), "could not release", "settle run") {
		t.Errorf("drain with the database down did not say the run could not be released:\n%s", d.Log())
	}
	px.Restore()
	r.daemon("dbdown-b", body, testkit.DaemonOptions{})
	r.verify(expect{})
	if runs := r.runsOf(id); runs != 2 {
		t.Errorf("task %d: %d runs, want the drained one and exactly one more", id, runs)
	}
}

// Ensure that after kill -9 of the daemon, the restarted daemon kills the
// process group its previous incarnation left (a grandchild survives the
// parent-death signal) before the task runs again.
func TestProc_KillNineOrphanSweep(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("k9", "w", `{"mode":"grandchild","ms_by_attempt":[60000,500]}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "30s", heartbeat: "5s"})
	a := r.daemon("k9", body, testkit.DaemonOptions{})
	// In a cgroup the restarted daemon kills the old run's processes before
	// it abandons the run, so the abandonment bounds the run's life.
	r.restartKills = a.Status(t).Containment.Kind == "cgroup"
	_, gpid := r.waitEvent("spawn", id, 20*time.Second)
	a.Kill()
	fig.fault("sigkill-daemon", 1)
	time.Sleep(500 * time.Millisecond)
	if !testkit.Alive(gpid) {
		t.Fatalf("grandchild %d died with the daemon: this scenario cannot show the orphan sweep", gpid)
	}
	restart := r.dbNow()
	b := r.daemon("k9", body, testkit.DaemonOptions{Dir: a.Dir})
	b.WaitLog(t, "killed leftover", 5*time.Second)
	if testkit.Alive(gpid) {
		t.Errorf("grandchild %d of the killed daemon still alive after restart", gpid)
	}
	r.verify(expect{})
	var gone time.Time
	var next time.Time
	r.scalar(&gone, `SELECT max(at) FROM {s}.audit WHERE pid = $1`, gpid)
	r.scalar(&next, `SELECT min(started_at) FROM {s}.runs WHERE task_id = $1 AND started_at > $2`, id, restart)
	if !gone.Before(next) {
		t.Errorf("orphan last seen %s, after the task's next run started %s", gone, next)
	}
	fig.recovered(t.Name(), next.Sub(restart))
}

func containsAny(s string, subs ...string) bool {
	for _, x := range subs {
		if strings.Contains(s, x) {
			return true
		}
	}
	return false
}
