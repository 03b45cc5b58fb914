package faults

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a daemon that runs out of file descriptors gives the runs it
// cannot start back unstarted, their attempts refunded, holds its claims
// back and says so in its status, and that every task still ends done at
// its first counted attempt once descriptors free up: none fails for the
// daemon's own want.
func TestResources_DescriptorExhaustion(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const tasks = 12
	var lanes []string
	for i := range tasks {
		lane := fmt.Sprintf("fd%d", i)
		lanes = append(lanes, lane)
		r.enqueue(lane, "w", `{"mode":"sleep","ms":1500}`, 2)
	}
	// Room for the daemon and a few children, not for twelve: the limit
	// binds the hard limit too, so the runtime cannot raise it.
	bin := testkit.MustScript(t, r.dir, "qd-few-files", fmt.Sprintf("ulimit -n 48\nexec %q \"$@\"\n", r.qd))
	d := testkit.StartDaemon(t, bin, r.url, "starved", "shutdown_grace = \"5s\"\n"+
		r.agentHCL(agentConf{name: "w", lanes: lanes, parallel: tasks}), testkit.DaemonOptions{})
	held := false
	stop := poll(100*time.Millisecond, func() {
		if s := d.Status(t); s.StartsHeld != nil {
			held = true
		}
	})
	r.verify(expect{timeout: 90 * time.Second})
	stop()
	var givenBack, failed, counted int
	var tid, rid int64
	var ta, ra int
	var rst, rsum string
	r.scalar(&givenBack, `SELECT count(*) FROM {s}.runs WHERE summary LIKE 'given back unstarted%'`)
	r.scalar(&failed, `SELECT count(*) FROM {s}.runs WHERE state = 'failed'`)
	// An attempt may be counted by a run that did start and then lost its
	// heartbeats for want of a connection (documented: a database out of
	// reach counts the attempt); never by a start that was given back.
	r.scalar(&counted, `SELECT count(*) FROM {s}.tasks t WHERE attempts <> 1 AND NOT EXISTS (
		SELECT 1 FROM {s}.runs r WHERE r.task_id = t.id AND (r.summary LIKE 'lease expired%' OR r.summary LIKE 'killed: no heartbeat answer%'))`)
	r.eachRow(`SELECT t.id, t.attempts, r.id, r.attempt, r.state, r.summary FROM {s}.tasks t JOIN {s}.runs r ON r.task_id = t.id
		WHERE t.attempts <> 1 ORDER BY r.id`, func() {
		t.Logf("task %d attempts %d: run %d attempt %d %s %q", tid, ta, rid, ra, rst, rsum)
	}, &tid, &ta, &rid, &ra, &rst, &rsum)
	fig.fault("descriptor-exhaustion", givenBack)
	if givenBack == 0 {
		t.Fatalf("no run was given back: the daemon never ran out of descriptors, the test proves nothing\n%s", d.Log())
	}
	if !held {
		t.Errorf("qd status never said starts were held, though %d runs were given back", givenBack)
	}
	if failed > 0 {
		for _, line := range strings.Split(d.Log(), "\n") {
			if strings.Contains(line, "cannot start child") && !strings.Contains(line, "out of resources") {
				t.Log(line)
			}
		}
		t.Errorf("%d runs failed: a start the daemon could not make counted against the task", failed)
	}
	if counted > 0 {
		t.Errorf("%d tasks ended with attempts other than 1: a refunded start was counted", counted)
	}
	t.Logf("%d tasks done; %d runs given back unstarted while descriptors ran out", tasks, givenBack)
}
