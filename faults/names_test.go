package faults

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a second daemon started with the same name (the default name is
// the host name, so two configs on one host share it) is refused at start
// with an error naming the first one's host and pid, and that the first
// one's live runs are neither abandoned nor run a second time.
func TestNames_SameNameRefused(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	ids := []int64{
		r.enqueue("twin1", "w", `{"mode":"sleep","ms":6000}`, 3),
		r.enqueue("twin2", "w", `{"mode":"sleep","ms":6000}`, 3),
	}
	body := r.agentHCL(agentConf{name: "w", lanes: []string{"twin1", "twin2"}, parallel: 2})
	a := r.daemon("twin", body, testkit.DaemonOptions{})
	for _, id := range ids {
		r.waitEvent("start", id, 20*time.Second)
	}
	b := r.daemon("twin", body, testkit.DaemonOptions{NoWait: true})
	fig.fault("same-name-daemon", 1)
	if code := b.Wait(t, 20*time.Second); code != 1 {
		t.Errorf("second daemon with the same name exited %d, want 1", code)
	}
	host, _ := os.Hostname()
	want := fmt.Sprintf(`supervisor name "twin" is in use by the qd daemon on host %s (pid %d,`, host, a.PID())
	if !strings.Contains(b.Log(), want) {
		t.Errorf("second daemon's error does not name the first one (want %q):\n%s", want, b.Log())
	}
	r.verify(expect{})
	for _, bad := range []string{"lease lost", "earlier incarnation"} {
		if strings.Contains(a.Log(), bad) {
			t.Errorf("first daemon logged %q: its runs were touched by the second one", bad)
		}
	}
	var runs int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	if runs != len(ids) {
		t.Errorf("%d runs for %d tasks, want one each", runs, len(ids))
	}
}

// Ensure the name of a daemon killed with -9 may be used at once by another
// daemon of this host (the holder's process is gone), but that daemon does
// not abandon the dead one's runs (it cannot prove they are its own): they
// wait for their lease. The dead daemon restarted on its own state
// directory abandons them at once.
func TestNames_TakeOverFromDeadDaemon(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("gone", "w", `{"mode":"sleep","ms_by_attempt":[60000,300]}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "30s", heartbeat: "5s"})
	a := r.daemon("gone", body, testkit.DaemonOptions{})
	run1, _ := r.waitEvent("start", id, 20*time.Second)
	a.Kill()
	fig.fault("sigkill-daemon", 1)
	b := r.daemon("gone", r.agentHCL(agentConf{name: "other"}), testkit.DaemonOptions{})
	time.Sleep(2 * time.Second)
	if state := r.runState(run1); state != "running" {
		t.Errorf("run %d of the killed daemon is %s after another daemon took its name, want running until its lease ends", run1, state)
	}
	b.Signal(syscall.SIGTERM)
	b.Wait(t, 15*time.Second)
	restart := r.dbNow()
	c := r.daemon("gone", body, testkit.DaemonOptions{Dir: a.Dir})
	c.WaitLog(t, "abandoned runs of an earlier incarnation", 10*time.Second)
	r.verify(expect{})
	var next time.Time
	r.scalar(&next, `SELECT min(started_at) FROM {s}.runs WHERE task_id = $1 AND id <> $2`, id, run1)
	if d := next.Sub(restart); d > 10*time.Second {
		t.Errorf("the task ran again %s after the restart; the earlier incarnation's run was not abandoned at once", d)
	} else {
		fig.recovered(t.Name(), d)
	}
}
