package pg_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// Ensure claim, reap, heartbeat and settle never scan tasks or runs
// sequentially with 100k finished tasks and their runs in history, even
// under the generic plans that prepared statements end up with. The
// statements run inside the schema's functions, so auto_explain shows
// every nested statement's plan.
func TestPlans_NoSeqScanWithHistory(t *testing.T) {
	p := MustOpen(t)
	s := p.Schema()
	setup := MustConn(t)
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.lanes (name, max_running) SELECT 'h' || i, 4 FROM generate_series(0, 49) i`, s),
		fmt.Sprintf(`INSERT INTO %[1]s.tasks (lane, agent, payload, payload_text, run_after, attempts, max_attempts, state, finished_at)
			SELECT 'h' || (i %% 50), 'a', '{}', '{}', now() - interval '1 day', 1, 3, 'done', now() - interval '1 day'
			FROM generate_series(1, 100000) i`, s),
		fmt.Sprintf(`INSERT INTO %[1]s.runs (task_id, lane, agent, attempt, owner, state, lease_expires_at, finished_at)
			SELECT id, lane, agent, 1, 'old', 'completed', finished_at, finished_at FROM %[1]s.tasks`, s),
		fmt.Sprintf(`ANALYZE %[1]s.lanes, %[1]s.tasks, %[1]s.runs`, s),
	} {
		mustExec(t, setup, q)
	}
	// Live work: an expired run to reap, queued tasks to claim.
	for i := range 6 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: fmt.Sprintf("h%d", i%3), Agent: "a"})
	}
	expired := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"h0"}, Owner: "o", Lease: 100 * time.Millisecond})
	time.Sleep(200 * time.Millisecond)

	x := MustExplainer(t)
	x.workload(p, expired.RunID)
	x.check(append(workloadPlans, "runs_running_lane_idx", "tasks_eligible_idx"))
}

// Ensure the plans a session made while tasks and runs were empty (as on a
// fresh queue, or right after statistics were taken on empty tables) do not
// scan them sequentially once they hold 100k finished tasks and runs: the
// functions keep their first generic plans for the whole session.
func TestPlans_NoSeqScanAfterGrowth(t *testing.T) {
	p := MustOpen(t)
	s := p.Schema()
	setup := MustConn(t)
	mustExec(t, setup, fmt.Sprintf(`INSERT INTO %[1]s.lanes (name, max_running) SELECT 'h' || i, 4 FROM generate_series(0, 49) i`, s))
	mustExec(t, setup, fmt.Sprintf(`ANALYZE %[1]s.lanes, %[1]s.tasks, %[1]s.runs`, s))
	x := MustExplainer(t)
	for i := range 6 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: fmt.Sprintf("h%d", i%3), Agent: "a"})
	}
	x.workload(p, 0) // plans made on empty statistics
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.tasks (lane, agent, payload, payload_text, run_after, attempts, max_attempts, state, finished_at)
			SELECT 'h' || (i %% 50), 'a', '{}', '{}', now() - interval '1 day', 1, 3, 'done', now() - interval '1 day'
			FROM generate_series(1, 100000) i`, s),
		fmt.Sprintf(`INSERT INTO %[1]s.runs (task_id, lane, agent, attempt, owner, state, lease_expires_at, finished_at)
			SELECT id, lane, agent, 1, 'old', 'completed', finished_at, finished_at FROM %[1]s.tasks WHERE state = 'done'`, s),
	} {
		mustExec(t, setup, q)
	}
	for i := range 6 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: fmt.Sprintf("h%d", i%3), Agent: "a"})
	}
	x.reset()
	x.workload(p, 0)
	x.check(workloadPlans)
}

// workloadPlans appear in the plans of every workload: its statements
// were explained, those of each way a claim goes included.
var workloadPlans = []string{
	"Update on runs", "Update on tasks", "Insert on runs",
	"tasks_head_idx", "tasks_agent_head_idx", // claim_head, of any agent and of one
	"claim_named(ARRAY(SELECT",          // claim_any, when the head falls short
	"WHERE r.claim_token = p_token AND", // claim, a token used before
	"SELECT r.task_id, r.id, s.event",   // settle_runs, a settlement with an event
}

// explainer is a session that logs the plan of every statement run inside
// qd's functions (auto_explain with nested statements) under generic plans.
type explainer struct {
	t      *testing.T
	conn   *pgx.Conn
	schema string
	mu     sync.Mutex
	plans  []string
	rounds int // workloads run
}

func MustExplainer(t *testing.T) *explainer {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(MustTestURL(t))
	if err != nil {
		t.Fatal(err)
	}
	x := &explainer{t: t}
	cfg.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		x.mu.Lock()
		x.plans = append(x.plans, n.Message)
		x.mu.Unlock()
	}
	x.conn, err = pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.conn.Close(context.Background()) })
	for _, q := range []string{
		"LOAD 'auto_explain'",
		"SET auto_explain.log_min_duration = 0",
		"SET auto_explain.log_nested_statements = on",
		"SET auto_explain.log_level = notice",
		"SET plan_cache_mode = force_generic_plan",
	} {
		mustExec(t, x.conn, q)
	}
	return x
}

func (x *explainer) reset() {
	x.mu.Lock()
	x.plans = nil
	x.mu.Unlock()
}

// run runs one statement in its own READ COMMITTED transaction.
func (x *explainer) run(sql string, args ...any) {
	x.t.Helper()
	ctx := context.Background()
	tx, err := x.conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		x.t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		x.t.Fatal(err)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		x.t.Fatalf("%s: %v", sql, err)
	}
	if err := tx.Commit(ctx); err != nil {
		x.t.Fatal(err)
	}
}

// workload runs every function of the schema: claims of one, several and
// any lane (of one agent, and of any when the head of the queue is a
// paused lane's, so that every lane is looked at), a claim with a token
// used before, a heartbeat and settlements of live runs (settle_runs, and
// settle as older builds call it), abandon_owner and enqueue. When expired
// is not 0 it must have been reaped by then.
func (x *explainer) workload(p *pg.Provider, expired int64) {
	x.t.Helper()
	t, s := x.t, p.Schema()
	// Tokens of their own each time: a token used before only returns its
	// earlier claim's runs.
	x.rounds++
	if x.rounds == 1 {
		// The head of the queue of any agent is a paused lane's, so that
		// the claim of any lane and agent looks at every lane.
		ctx := context.Background()
		if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "paused", Paused: boolp(true)}); err != nil {
			t.Fatal(err)
		}
		for range 100 {
			MustEnqueue(t, p, lease.EnqueueParams{Lane: "paused", Agent: "b", Priority: -1})
		}
	}
	x.run(fmt.Sprintf(`SELECT * FROM %s.claim(ARRAY['h0'], NULL, 'o', '', '1 minute', 1, 'plan-1-%d')`, s, x.rounds))
	x.run(fmt.Sprintf(`SELECT * FROM %s.claim(NULL, 'a', 'o', '', '1 minute', 4, 'plan-2-%d')`, s, x.rounds))
	x.run(fmt.Sprintf(`SELECT * FROM %s.claim(ARRAY['h1', 'h2'], NULL, 'o', '', '1 minute', 2, 'plan-3-%d')`, s, x.rounds))
	x.run(fmt.Sprintf(`SELECT * FROM %s.claim(NULL, NULL, 'o', '', '1 minute', 1, 'plan-4-%d')`, s, x.rounds))
	// A token used before: the runs of its claim, claiming nothing.
	x.run(fmt.Sprintf(`SELECT * FROM %s.claim(ARRAY['h0'], NULL, 'o', '', '1 minute', 1, 'plan-1-%d')`, s, x.rounds))
	live, err := p.Runs(context.Background(), lease.RunFilter{State: lease.RunRunning})
	if err != nil || len(live) < 2 {
		t.Fatalf("live runs: %d %v", len(live), err)
	}
	if expired != 0 {
		if r := MustRun(t, p, expired); r.State != lease.RunAbandoned {
			t.Fatalf("the expired run was not reaped: %s", r.State)
		}
	}
	x.run(fmt.Sprintf(`SELECT * FROM %s.heartbeat($1, $2, $3, $4, $5)`, s),
		[]int64{live[0].ID, live[1].ID}, []time.Duration{time.Minute, time.Minute}, []*int32{nil, nil}, []*time.Time{nil, nil}, []*string{nil, nil})
	x.run(fmt.Sprintf(`SELECT * FROM %[1]s.settle_runs(ARRAY[ROW($1, NULL, 'failed', '', NULL, NULL, NULL, NULL, false, NULL, NULL,
		'disk full', 'timeout', NULL)::%[1]s.settlement])`, s), live[0].ID)
	// The settlement call of older builds, which hands its rows to settle_runs.
	x.run(fmt.Sprintf(`SELECT * FROM %s.settle($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`, s),
		[]int64{live[1].ID}, []string{"failed"}, []string{""}, []*int32{nil}, []*string{nil}, []*string{nil}, []*time.Duration{nil}, []bool{false},
		[]*int64{nil}, []*int64{nil}, []*string{nil})
	x.run(fmt.Sprintf(`SELECT * FROM %s.abandon_owner('o', ARRAY['x'], 'gone')`, s))
	x.run(fmt.Sprintf(`SELECT * FROM %s.enqueue('h3', 'a', '{}', 0, NULL, NULL, 3, 'key', NULL)`, s))
}

// check fails the test on a sequential scan of tasks or runs, or a partial
// index walked without a search condition, in any plan seen; each of want
// must appear in some plan (so the statements were explained at all).
func (x *explainer) check(want []string) {
	t := x.t
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	all := strings.Join(x.plans, "\n")
	for _, w := range want {
		if !strings.Contains(all, w) {
			t.Errorf("no plan mentions %q: the statements were not all explained", w)
		}
	}
	// A partial index must be searched (an Index Cond on its key), never
	// walked whole: a walk visits every live run or unfinished task.
	for _, plan := range x.plans {
		for _, table := range []string{"tasks", "runs"} {
			if strings.Contains(plan, "Seq Scan on "+table) {
				t.Errorf("sequential scan of %s:\n%s", table, plan)
			}
		}
		lines := strings.Split(plan, "\n")
		for i, line := range lines {
			for _, idx := range []string{"runs_running_lane_idx", "runs_running_owner_idx", "tasks_dedupe_key_idx", "tasks_eligible_idx"} {
				if strings.Contains(line, "using "+idx) && (i+1 == len(lines) || !strings.Contains(lines[i+1], "Index Cond:")) {
					t.Errorf("%s walked without a search condition:\n%s", idx, plan)
				}
			}
		}
	}
	if t.Failed() {
		t.Logf("%d plans seen:\n%s", len(x.plans), all)
	}
}

// Ensure heartbeats are HOT updates of runs alone: no index of runs covers
// a column a heartbeat writes, the tasks table is never updated, and at
// least 95% of heartbeats write no index entry.
func TestHeartbeat_HOT(t *testing.T) {
	dbURL := MustDatabaseURL(t)
	const schema = "qd"
	p := MustOpenURL(t, dbURL, true)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	rows, err := conn.Query(ctx, `SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'qd.runs'::regclass`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	beaten := regexp.MustCompile(`\b(lease_expires_at|last_heartbeat_at|pid|last_output_at)\b`)
	for _, d := range defs {
		if col := beaten.FindString(d); col != "" {
			t.Errorf("an index covers %s, which every heartbeat writes: %s", col, d)
		}
	}

	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "hot", MaxRunning: intp(100)}); err != nil {
		t.Fatal(err)
	}
	for range 100 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "hot", Agent: "a"})
	}
	ls, err := p.ClaimMany(ctx, lease.ClaimParams{Owner: "o"}, 100)
	if err != nil || len(ls) != 100 {
		t.Fatalf("claim many: %d %v", len(ls), err)
	}
	var start time.Time
	if err := conn.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&start); err != nil {
		t.Fatal(err)
	}
	const rounds = 50
	held := 0 // the most transactions of other sessions seen open at once
	beats := make([]lease.Beat, len(ls))
	for r := range rounds {
		for i, l := range ls {
			beats[i] = lease.Beat{RunID: l.RunID, Lease: time.Minute, PID: 1000 + r, LastOutputAt: time.Now()}
		}
		res, err := p.Heartbeat(ctx, beats...)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range res {
			if b.Err != nil {
				t.Fatal(b.Err)
			}
		}
		// Any transaction of another session, in any database, open while
		// the heartbeats ran can keep their old row versions from being
		// pruned, and without pruning a page soon has no room for a HOT
		// update: sample them after every round (other tests run alongside).
		var open int
		err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()
			AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL)`).Scan(&open)
		if err != nil {
			t.Fatal(err)
		}
		held = max(held, open)
	}
	var older int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid()
		AND (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL) AND xact_start < $1`, start).Scan(&older)
	if err != nil {
		t.Fatal(err)
	}
	held = max(held, older)
	p.Close() // the backends flush their statistics as they exit

	var upd, hot, taskUpd int64
	for range 100 {
		mustExec(t, conn, "SELECT pg_stat_clear_snapshot()")
		err := conn.QueryRow(ctx, `SELECT r.n_tup_upd, r.n_tup_hot_upd, t.n_tup_upd
			FROM pg_stat_user_tables r, pg_stat_user_tables t
			WHERE r.schemaname = $1 AND r.relname = 'runs' AND t.schemaname = $1 AND t.relname = 'tasks'`,
			schema).Scan(&upd, &hot, &taskUpd)
		if err != nil {
			t.Fatal(err)
		}
		if upd >= rounds*100 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if upd != rounds*100 {
		t.Fatalf("statistics show %d updates of runs, want %d", upd, rounds*100)
	}
	if taskUpd != 100 {
		t.Errorf("tasks were updated %d times, want 100 (the claims): heartbeats must not touch tasks", taskUpd)
	}
	share := float64(hot) / float64(upd)
	t.Logf("heartbeats: %d updates, %d HOT (%.1f%%)", upd, hot, 100*share)
	if held > 0 {
		t.Logf("up to %d transactions of other sessions were open during the heartbeats and may have held back pruning: the HOT share is not judged", held)
		return
	}
	if share < 0.95 {
		t.Errorf("HOT share of heartbeats %.1f%%, want at least 95%%", 100*share)
	}
}
