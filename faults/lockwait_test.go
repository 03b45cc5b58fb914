package faults

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a claim that waited out a lock longer than the lease (qd.runs held
// in ACCESS EXCLUSIVE mode from another session) does not start a child it
// would have to kill at once: the late lease is given back unstarted with
// its attempt refunded, so a task with one attempt still runs once and
// completes, and no possible overlap is reported where none could happen.
func TestPG_ClaimAfterLockWait(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	body := r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"})
	d := r.daemon("lockwait", body, testkit.DaemonOptions{})
	time.Sleep(500 * time.Millisecond) // start-up housekeeping done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, r.expand(`LOCK TABLE {s}.runs IN ACCESS EXCLUSIVE MODE`)); err != nil {
		t.Fatal(err)
	}
	id := r.enqueue("lockwait", "w", `{"mode":"sleep","ms":300}`, 1)
	fig.fault("claim-after-lock-wait", 1)
	time.Sleep(8 * time.Second)
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r.verify(expect{})
	var attempts, starts int
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
	r.scalar(&starts, `SELECT count(*) FROM {s}.audit WHERE task_id = $1 AND event = 'start'`, id)
	if attempts != 1 || starts != 1 {
		t.Errorf("task %d: %d attempts counted, %d children started; want 1 and 1", id, attempts, starts)
	}
	d.WaitLog(t, "giving the task back unstarted", 5*time.Second)
	for _, bad := range []string{"may have overlapped", "lease expired"} {
		if strings.Contains(d.Log(), bad) {
			t.Errorf("daemon reported %q after a lock wait in which no overlap was possible", bad)
		}
	}
}
