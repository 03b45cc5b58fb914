package faults

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a daemon whose state directory is deleted (rm -rf) while it runs
// children keeps running them to their end, runs the tasks enqueued after,
// says in qd status that the directory was lost and remade, and remakes
// its proof of incarnation and its child records, so that a restart after
// a kill -9 still kills the children it left and abandons their runs at
// once: no task lost, no two copies of a task at once.
func TestStateDir_DeletedUnderRunningDaemon(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	body := r.agentHCL(agentConf{name: "w", parallel: 3, lease: "5s", heartbeat: "1s"})
	ids := []int64{
		r.enqueue("sd1", "w", `{"mode":"sleep","ms":2000}`, 3),
		r.enqueue("sd2", "w", `{"mode":"sleep","ms":2000}`, 3),
	}
	a := r.daemon("statedir", body, testkit.DaemonOptions{})
	r.restartKills = a.Status(t).Containment.Kind == "cgroup"
	for _, id := range ids {
		r.waitEvent("start", id, 20*time.Second)
	}
	removeUnder(t, a.StateDir)
	fig.fault("state-dir-deleted", 1)
	ids = append(ids, r.enqueue("sd3", "w", `{"mode":"line","bytes":100}`, 3))
	r.waitStates("done", nil, 30*time.Second)
	st := a.Status(t).StateDir
	t.Logf("status after the deletion: %+v", st)
	if !strings.Contains(st.Lost, "deleted") {
		t.Errorf("qd status after the state directory was deleted: %+v, want it to say so", st)
	}
	if _, err := os.Stat(a.StateDir + "/daemon.lock"); err != nil {
		t.Errorf("the state directory was not remade: %v", err)
	}

	// A long run, the directory deleted again, then the daemon killed:
	// its restart must find its child and its incarnation.
	long := r.enqueue("sd4", "w", `{"mode":"sleep","ms_by_attempt":[60000,300]}`, 3)
	run1, pid := r.waitEvent("start", long, 20*time.Second)
	remade := strings.Count(a.Log(), "state directory was remade")
	removeUnder(t, a.StateDir)
	fig.fault("state-dir-deleted", 1)
	testkit.Eventually(t, 10*time.Second, "the state directory remade again", func() bool {
		return strings.Count(a.Log(), "state directory was remade") > remade
	})
	a.Kill()
	fig.fault("sigkill-daemon", 1)
	restart := r.dbNow()
	b := r.daemon("statedir", body, testkit.DaemonOptions{Dir: a.Dir})
	b.WaitLog(t, "abandoned runs of an earlier incarnation", 15*time.Second)
	if testkit.Alive(pid) {
		t.Errorf("child %d of run %d outlived the killed daemon's restart", pid, run1)
	}
	r.waitStates("done", nil, 30*time.Second)
	var next time.Time
	r.scalar(&next, `SELECT min(started_at) FROM {s}.runs WHERE task_id = $1 AND id <> $2`, long, run1)
	if d := next.Sub(restart); d > 4*time.Second {
		t.Errorf("the task ran again %s after the restart; its run was left to its lease", d)
	} else {
		fig.recovered(t.Name(), d)
	}

	// The daemon killed, then its state directory deleted while none
	// runs: the restart cannot prove the dead incarnation gone and leaves
	// its run to its lease, saying so. Where runs are in cgroups (named
	// after the daemon, not kept in the state directory) the dead one's
	// child is killed at start, so the task never runs twice at once.
	if k := b.Status(t).Containment.Kind; k != "cgroup" {
		t.Logf("containment is %q: a child of a daemon whose state directory went while it was down outlives it (docs/service.md)", k)
		r.verify(expect{})
		return
	}
	last := r.enqueue("sd5", "w", `{"mode":"sleep","ms_by_attempt":[60000,300]}`, 3)
	run5, pid5 := r.waitEvent("start", last, 20*time.Second)
	b.Kill()
	if err := os.RemoveAll(b.StateDir); err != nil {
		t.Fatal(err)
	}
	fig.fault("sigkill-daemon", 1)
	fig.fault("state-dir-deleted", 1)
	c := r.daemon("statedir", body, testkit.DaemonOptions{Dir: a.Dir})
	c.WaitLog(t, "cannot be proved gone and are left to their leases", 15*time.Second)
	if testkit.Alive(pid5) {
		t.Errorf("child %d of run %d of the killed daemon is alive after the restart on a deleted state directory", pid5, run5)
	}
	if st := r.runState(run5); st != "running" {
		t.Errorf("run %d of the unproved incarnation is %s at once after the restart, want running until its lease ends", run5, st)
	}
	r.verify(expect{})
}

// removeUnder deletes dir as `rm -rf` would, under a daemon that writes in
// it and remakes what it sees go. The daemon may remake its files while
// the removal is still emptying the directory, which then cannot be
// removed (ENOTEMPTY): its contents went, and the daemon has already
// answered, which is the fault this test makes. Removing again would
// delete what it remade.
func removeUnder(t *testing.T, dir string) {
	t.Helper()
	err := os.RemoveAll(dir)
	if errors.Is(err, syscall.ENOTEMPTY) {
		t.Logf("the daemon remade %s while it was being removed: %v", dir, err)
		return
	}
	if err != nil {
		t.Fatalf("remove %s: %v", dir, err)
	}
}
