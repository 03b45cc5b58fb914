package faults

import (
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// mustCgroups reads how daemon d contains its runs, and skips the test where it has no cgroups (not root, no cgroup2), except
// under CI, where they must be in force.
func mustCgroups(t *testing.T, d *testkit.Daemon) {
	t.Helper()
	c := d.Status(t).Containment
	if c.Kind == "cgroup" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("runs not in cgroups under CI: %s (%s)", c.Kind, c.Reason)
	}
	t.Skipf("runs not in cgroups here: %s (%s)", c.Kind, c.Reason)
}

// Ensure grandchildren that call setsid, out of their run's process group,
// die with their run wherever it ends (exit, timeout, cancel, the daemon's
// stop) when runs have cgroups: the audit counts them as orphans, and
// finds none.
func TestProc_SetsidGrandchildrenContained(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	quick := r.enqueue("sx", "w", `{"mode":"setsid","ms":300}`, 3)
	timed := r.enqueue("st", "t", `{"mode":"setsid","ms":60000}`, 1)
	cancelled := r.enqueue("sc", "w", `{"mode":"setsid","ms":60000}`, 3)
	drained := r.enqueue("sd", "w", `{"mode":"setsid","ms":60000,"term_exit":143}`, 3)
	body := r.agentHCL(agentConf{name: "w", parallel: 3, extra: `kill_grace = "1s"`}) +
		r.agentHCL(agentConf{name: "t", extra: "timeout = \"2s\"\nkill_grace = \"1s\""})
	d := r.daemon("setsid", body, testkit.DaemonOptions{})
	mustCgroups(t, d)
	grand := map[int64]int{}
	for _, id := range []int64{quick, timed, cancelled, drained} {
		_, grand[id] = r.waitEvent("spawn", id, 20*time.Second)
	}
	testkit.MustQD(t, r.qd, r.url, "cancel", strconv.FormatInt(cancelled, 10))
	fig.fault("setsid-cancel", 1)
	fig.fault("setsid-timeout", 1)
	testkit.Eventually(t, 15*time.Second, "setsid grandchildren gone after exit, timeout and cancel", func() bool {
		return !testkit.Alive(grand[quick]) && !testkit.Alive(grand[timed]) && !testkit.Alive(grand[cancelled])
	})
	d.Signal(syscall.SIGTERM)
	fig.fault("setsid-drain", 1)
	if code := d.Wait(t, 20*time.Second); code != 0 {
		t.Errorf("drain: exit %d, want 0", code)
	}
	if testkit.Alive(grand[drained]) {
		t.Errorf("setsid grandchild %d outlived the daemon's stop", grand[drained])
	}
	r.verify(expect{states: map[int64]string{timed: "failed", cancelled: "cancelled", drained: "queued"}})
}

// Ensure that after kill -9 of the daemon a setsid grandchild, which the
// child journal cannot find (it left the recorded group), is found by its
// run's cgroup and killed by the restarted daemon.
func TestProc_KillNineSetsidSweep(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("k9s", "w", `{"mode":"setsid","ms_by_attempt":[60000,300]}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "30s", heartbeat: "5s"})
	a := r.daemon("k9s", body, testkit.DaemonOptions{})
	mustCgroups(t, a)
	_, gpid := r.waitEvent("spawn", id, 20*time.Second)
	a.Kill()
	fig.fault("sigkill-daemon", 1)
	time.Sleep(500 * time.Millisecond)
	if !testkit.Alive(gpid) {
		t.Fatalf("setsid grandchild %d died with the daemon: this scenario cannot show the sweep", gpid)
	}
	b := r.daemon("k9s", body, testkit.DaemonOptions{Dir: a.Dir})
	b.WaitLog(t, "killed leftover processes in the cgroup", 5*time.Second)
	if testkit.Alive(gpid) {
		t.Errorf("setsid grandchild %d of the killed daemon still alive after restart", gpid)
	}
	r.verify(expect{})
}

// Ensure that with cgroups ruled out the daemon says so at start and in
// qd status, and runs still work and are cleaned up as process groups.
func TestProc_ProcessGroupFallback(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("pgf", "w", `{"mode":"grandchild","ms":300}`, 3)
	d := r.daemon("pgf", r.agentHCL(agentConf{name: "w"}), testkit.DaemonOptions{Env: []string{"QD_NO_CGROUP=1"}})
	d.WaitLog(t, "runs are contained by process group only", 5*time.Second)
	if c := d.Status(t).Containment; c.Kind != "process group" || c.Reason == "" {
		t.Errorf("containment %+v, want process group and why", c)
	}
	r.waitEvent("spawn", id, 20*time.Second)
	r.verify(expect{})
}
