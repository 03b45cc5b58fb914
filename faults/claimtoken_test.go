package faults

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a claim whose COMMIT reply is lost is asked again with its token
// on a fresh connection and answered with the run it made: the agent runs
// once, the task spends one attempt and has one run, every time.
func TestPG_ClaimCommitReplyLost(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	d := r.daemon("claimcut", r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"}), testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	const cuts = 5
	var ids []int64
	for i := range cuts {
		marker := fmt.Sprintf("claimcut%d-%s", i, strconv.FormatInt(time.Now().UnixNano(), 36))
		cut := px.LoseCommitAfter(marker)
		id := r.enqueue("cc", "w", `{"mode":"sleep","ms":100,"marker":"`+marker+`"}`, 3)
		ids = append(ids, id)
		waitLostCommit(t, cut, d, "the claim's")
		r.waitEvent("end", id, 20*time.Second)
	}
	r.verify(expect{})
	burned := 0
	for _, id := range ids {
		var attempts, starts int
		r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
		r.scalar(&starts, `SELECT count(*) FROM {s}.audit WHERE task_id = $1 AND event = 'start'`, id)
		runs := r.runsOf(id)
		burned += attempts - 1
		if attempts != 1 || runs != 1 || starts != 1 {
			t.Errorf("task %d after its claim's reply was lost: %d attempts, %d runs, %d agent starts; want 1, 1, 1\n%s",
				id, attempts, runs, starts, d.Log())
		}
	}
	t.Logf("claims with lost COMMIT replies: %d; attempts burned: %d", cuts, burned)
	d.WaitLog(t, "claim retried with its token", time.Second)
}

// Ensure a claim whose COMMIT reply is lost while the database then stays
// unreachable past the lease's local deadline is never started, and that
// its run is given back with the attempt refunded once the database
// answers: the task is done by a later run at attempt 1.
func TestPG_ClaimOutcomeUnknownGivenBack(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	marker := "claimgone-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	id := r.enqueue("cg", "w", `{"mode":"sleep","ms":100,"marker":"`+marker+`"}`, 3)
	cut := px.LoseCommitAfter(marker)
	d := r.daemon("claimgone", r.agentHCL(agentConf{name: "w", lease: "3s", heartbeat: "1s"}), testkit.DaemonOptions{}, r.viaURL(px.Addr()))
	waitLostCommit(t, cut, d, "the claim's")
	px.Refuse()
	fig.fault("pg-restart", 1)
	d.WaitLog(t, "claim outcome unknown; its runs will be given back", 15*time.Second)
	px.Restore()
	r.verify(expect{})
	var first int64
	var state, summary string
	var events, attempts int
	r.scalar(&first, `SELECT min(id) FROM {s}.runs WHERE task_id = $1`, id)
	r.scalar(&state, `SELECT state FROM {s}.runs WHERE id = $1`, first)
	r.scalar(&summary, `SELECT coalesce(summary, '') FROM {s}.runs WHERE id = $1`, first)
	r.scalar(&events, `SELECT count(*) FROM {s}.audit WHERE run_id = $1`, first)
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
	if state != "abandoned" || events != 0 {
		t.Errorf("run %d whose claim stayed unknown: state %s (%s), %d agent events; want abandoned and never started", first, state, summary, events)
	}
	if attempts != 1 || r.runsOf(id) != 2 {
		t.Errorf("task %d: %d attempts over %d runs; want 1 over 2: the given-back run refunded", id, attempts, r.runsOf(id))
	}
	t.Logf("run %d given back: %s", first, summary)
}
