package pg_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func settle1(t *testing.T, p lease.Provider, s lease.Settlement) error {
	t.Helper()
	errs, err := p.Settle(context.Background(), s)
	if err != nil {
		t.Fatalf("settle run %d: %v", s.RunID, err)
	}
	return errs[0]
}

// Ensure a settlement retried after its COMMIT reply was lost succeeds and
// changes nothing, while a different outcome for the same run is refused.
func TestSettle_RetryIsIdempotent(t *testing.T) {
	p := MustOpen(t)
	id := MustEnqueue(t, p, lease.EnqueueParams{Agent: "a"})
	l := MustClaim(t, p, lease.ClaimParams{Owner: "o"})
	done := lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "first"}
	if err := settle1(t, p, done); err != nil {
		t.Fatal(err)
	}
	before, beforeRun := MustTask(t, p, id), MustRun(t, p, l.RunID)
	retry := done
	retry.Summary = "second"
	if err := settle1(t, p, retry); err != nil {
		t.Fatalf("same outcome again: %v, want nil", err)
	}
	after, afterRun := MustTask(t, p, id), MustRun(t, p, l.RunID)
	if !after.UpdatedAt.Equal(before.UpdatedAt) || !afterRun.FinishedAt.Equal(beforeRun.FinishedAt) || afterRun.Summary != "first" {
		t.Errorf("a repeated settlement changed the rows: task %+v → %+v, run summary %q", before, after, afterRun.Summary)
	}
	if err := settle1(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("other outcome after completion: %v, want ErrLeaseLost", err)
	}
	if err := settle1(t, p, lease.Settlement{RunID: 1 << 40, Outcome: lease.RunFailed}); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("unknown run: %v, want ErrNotFound", err)
	}
	if tk := MustTask(t, p, id); tk.State != lease.TaskDone {
		t.Errorf("task after refused settlements: %s, want done", tk.State)
	}
}

// Ensure each outcome moves the task as documented.
func TestSettle_Outcomes(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	claim := func(lane string, maxAttempts int) (int64, *lease.Lease) {
		id := MustEnqueue(t, p, lease.EnqueueParams{Lane: lane, Agent: "a", MaxAttempts: maxAttempts})
		return id, MustClaim(t, p, lease.ClaimParams{Lanes: []string{lane}, Owner: "o"})
	}
	fail, fl := claim("fail", 3)
	last, ll := claim("last", 1)
	back, bl := claim("back", 3)
	ab, al := claim("ab", 1)
	refund, rl := claim("refund", 1)
	cancel, cl := claim("cancel", 3)
	if _, err := p.Cancel(ctx, cancel); err != nil {
		t.Fatal(err)
	}
	errs, err := p.Settle(ctx,
		lease.Settlement{RunID: fl.RunID, Outcome: lease.RunFailed, RetryIn: time.Hour},
		lease.Settlement{RunID: ll.RunID, Outcome: lease.RunFailed},
		lease.Settlement{RunID: bl.RunID, Outcome: lease.RunFailed},
		lease.Settlement{RunID: al.RunID, Outcome: lease.RunAbandoned},
		lease.Settlement{RunID: rl.RunID, Outcome: lease.RunAbandoned, Refund: true},
		lease.Settlement{RunID: cl.RunID, Outcome: lease.RunFailed},
		lease.Settlement{RunID: cl.RunID, Outcome: lease.RunState("bogus")},
	)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs[:6] {
		if e != nil {
			t.Errorf("settlement %d: %v", i, e)
		}
	}
	if !errors.Is(errs[6], lease.ErrInvalid) {
		t.Errorf("bogus outcome: %v, want ErrInvalid", errs[6])
	}
	now := MustRun(t, p, fl.RunID).FinishedAt
	for _, c := range []struct {
		name     string
		id       int64
		state    lease.TaskState
		attempts int
		min, max time.Duration // run_after - finish
	}{
		{"failed with retry-in", fail, lease.TaskQueued, 1, 59 * time.Minute, 61 * time.Minute},
		{"failed, no attempts left", last, lease.TaskFailed, 1, -time.Hour, time.Hour},
		{"failed with backoff", back, lease.TaskQueued, 1, 7 * time.Second, 13 * time.Second},
		{"abandoned, no attempts left", ab, lease.TaskFailed, 1, -time.Hour, time.Hour},
		{"abandoned with refund", refund, lease.TaskQueued, 0, -time.Second, time.Second},
		{"failed while cancel requested", cancel, lease.TaskCancelled, 1, -time.Hour, time.Hour},
	} {
		tk := MustTask(t, p, c.id)
		d := tk.RunAfter.Sub(now)
		if tk.State != c.state || tk.Attempts != c.attempts || d < c.min || d > c.max {
			t.Errorf("%s: state %s attempts %d run_after %+v from now; want %s, %d, within [%s, %s]",
				c.name, tk.State, tk.Attempts, d, c.state, c.attempts, c.min, c.max)
		}
		if tk.State.Finished() == tk.FinishedAt.IsZero() {
			t.Errorf("%s: state %s with finished_at %v", c.name, tk.State, tk.FinishedAt)
		}
	}
}

// Ensure a lease that has expired is lost at once, before any reap: the
// heartbeat and a failure are refused and change nothing (a completion is
// taken late: Settle/LateCompletion in the conformance suite).
func TestHeartbeat_ExpiredIsLost(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	id := MustEnqueue(t, p, lease.EnqueueParams{Agent: "a"})
	l := MustClaim(t, p, lease.ClaimParams{Owner: "o", Lease: 300 * time.Millisecond})
	live := MustEnqueue(t, p, lease.EnqueueParams{Lane: "other", Agent: "a"})
	ll := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"other"}, Owner: "o", Lease: time.Minute})
	time.Sleep(500 * time.Millisecond)
	res, err := p.Heartbeat(ctx, lease.Beat{RunID: l.RunID}, lease.Beat{RunID: ll.RunID, PID: 7})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[0].Err, lease.ErrLeaseLost) {
		t.Errorf("heartbeat of an expired lease: %v, want ErrLeaseLost", res[0].Err)
	}
	if res[1].Err != nil || res[1].RunID != ll.RunID || !res[1].LeaseExpiresAt.After(ll.LeaseExpiresAt) {
		t.Errorf("heartbeat of a live lease beside it: %+v", res[1])
	}
	if err := settle1(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("failure of an expired lease: %v, want ErrLeaseLost", err)
	}
	if tk := MustTask(t, p, id); tk.State != lease.TaskRunning {
		t.Errorf("task of the expired run: %s, want running until reaped", tk.State)
	}
	if _, err := p.Cancel(ctx, live); err != nil {
		t.Fatal(err)
	}
	res, err = p.Heartbeat(ctx, lease.Beat{RunID: ll.RunID})
	if err != nil || res[0].Err != nil || !res[0].CancelRequested {
		t.Errorf("heartbeat after cancel: %+v %v; want the cancel request", res, err)
	}
	if r := MustRun(t, p, ll.RunID); r.PID != 7 || r.LeaseLeft <= 0 || r.SilentSeconds < 0 || !r.CancelRequested {
		t.Errorf("live run: pid %d lease left %s silent %f cancel %v", r.PID, r.LeaseLeft, r.SilentSeconds, r.CancelRequested)
	}
}

// Ensure AbandonOwner abandons the runs of the named instances of an owner
// only: a live run of another instance with the same owner stays.
func TestAbandonOwner(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	for _, lane := range []string{"a", "b", "c"} {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: lane, Agent: "x"})
	}
	old := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"a"}, Owner: "d", Instance: "old"})
	cur := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"b"}, Owner: "d", Instance: "new"})
	stranger := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"c"}, Owner: "e", Instance: "old"})
	ids, err := p.AbandonOwner(ctx, "d", []string{"old", "gone"}, "daemon restarted")
	if err != nil || len(ids) != 1 || ids[0] != old.RunID {
		t.Fatalf("abandon owner: %v %v, want [%d]", ids, err, old.RunID)
	}
	if r := MustRun(t, p, old.RunID); r.State != lease.RunAbandoned || r.Summary != "daemon restarted" {
		t.Errorf("abandoned run: %s %q", r.State, r.Summary)
	}
	if tk := MustTask(t, p, old.TaskID); tk.State != lease.TaskQueued {
		t.Errorf("task of the abandoned run: %s, want queued", tk.State)
	}
	for _, id := range []int64{cur.RunID, stranger.RunID} {
		if r := MustRun(t, p, id); r.State != lease.RunRunning {
			t.Errorf("run %d: %s, want running", id, r.State)
		}
	}
}

// Ensure one settlement call writes each of its runs and tasks once: a
// task row written twice (its state, then its finished_at) is two row
// versions, each with an entry in every index of tasks. The counts are the
// server's own for the transaction that made the call.
func TestSettle_WritesEachRowOnce(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	const n = 6
	for i := range n {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: fmt.Sprintf("w%d", i), Agent: "a", MaxAttempts: 1})
	}
	ls, err := p.ClaimMany(ctx, lease.ClaimParams{Owner: "o"}, n)
	if err != nil || len(ls) != n {
		t.Fatalf("claim %d: %d leases, %v", n, len(ls), err)
	}
	// Two complete, two fail for good (one attempt), two are abandoned and
	// refunded: every branch of the task's move.
	outcomes := []string{"completed", "completed", "failed", "failed", "abandoned", "abandoned"}
	ids := make([]int64, n)
	for i, l := range ls {
		ids[i] = l.RunID
	}
	refunds := []bool{false, false, false, false, true, true}
	tx, err := p.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	writes := func(table string) int64 {
		var upd int64
		if err := tx.QueryRow(ctx, `SELECT n_tup_upd FROM pg_stat_xact_user_tables WHERE relid = $1::regclass`,
			p.Schema()+"."+table).Scan(&upd); err != nil {
			t.Fatalf("read the writes of %s: %v", table, err)
		}
		return upd
	}
	// The counts of a session that have not reached the server's totals
	// yet (the claim's, on this pooled connection) show too: take the
	// difference.
	runs0, tasks0 := writes("runs"), writes("tasks")
	var ok int
	err = tx.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'ok') FROM `+p.Schema()+`.settle($1, $2, NULL, NULL, NULL, NULL, NULL, $3, NULL, NULL, NULL)`,
		ids, outcomes, refunds).Scan(&ok)
	if err != nil || ok != n {
		t.Fatalf("settle: %d ok, %v; want %d", ok, err, n)
	}
	if got := writes("runs") - runs0; got != n {
		t.Errorf("settling %d runs updated %d run rows, want %d", n, got, n)
	}
	if got := writes("tasks") - tasks0; got != n {
		t.Errorf("settling %d runs updated %d task rows, want %d (one write per task)", n, got, n)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[lease.TaskState]int{lease.TaskDone: 2, lease.TaskFailed: 2, lease.TaskQueued: 2}
	got := map[lease.TaskState]int{}
	for _, l := range ls {
		tk := MustTask(t, p, l.TaskID)
		got[tk.State]++
		if tk.State.Finished() == tk.FinishedAt.IsZero() {
			t.Errorf("task %d is %s with finished_at %v", tk.ID, tk.State, tk.FinishedAt)
		}
	}
	for st, k := range want {
		if got[st] != k {
			t.Errorf("tasks after settling: %v, want %v", got, want)
			break
		}
	}
}

// Ensure a qd built for schema version 16 to 18 still settles on this
// schema: it calls settle with eleven parallel arrays (and writes log_error
// itself), and each run answers as it would through Settle.
func TestSettle_OlderBuildsCall(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	task := MustEnqueue(t, p, lease.EnqueueParams{Lane: "old", Agent: "a"})
	l := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"old"}, Owner: "o"})
	conn := MustConn(t)
	settle := func(id int64, outcome string, token *string) string {
		t.Helper()
		var st string
		err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT status FROM %s.settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, p.Schema()),
			[]int64{id}, []string{outcome}, []string{"exited 0"}, []*int32{new(int32)}, []*string{nil}, []string{"tail\n"},
			[]*time.Duration{nil}, []bool{false}, []*int64{nil}, []*int64{nil}, []*string{token}).Scan(&st)
		if err != nil {
			t.Fatalf("settle as an older qd: %v", err)
		}
		return st
	}
	other := "another claim's token"
	for _, c := range []struct {
		id      int64
		outcome string
		token   *string
		want    string
	}{
		{l.RunID, "completed", &other, "missing"},
		{l.RunID, "completed", &l.ClaimToken, "ok"},
		{l.RunID, "completed", &l.ClaimToken, "same"},
		{l.RunID, "failed", nil, "lost"},
		{1 << 40, "completed", nil, "missing"},
	} {
		if got := settle(c.id, c.outcome, c.token); got != c.want {
			t.Errorf("settle run %d %s as an older qd: %q, want %q", c.id, c.outcome, got, c.want)
		}
	}
	if r := MustRun(t, p, l.RunID); r.State != lease.RunCompleted || r.Summary != "exited 0" || r.OutputTail != "tail\n" ||
		r.ExitCode == nil || *r.ExitCode != 0 {
		t.Errorf("run settled by an older qd: %+v", r)
	}
	if tk := MustTask(t, p, task); tk.State != lease.TaskDone {
		t.Errorf("task of a run an older qd settled: %s, want done", tk.State)
	}
}
