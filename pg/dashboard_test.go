package pg_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// MustSettle claims one task of lane and settles its run with outcome.
func MustSettle(tb testing.TB, p *pg.Provider, lane string, outcome lease.RunState) *lease.Lease {
	tb.Helper()
	l, err := p.Claim(context.Background(), lease.ClaimParams{Lanes: []string{lane}, Owner: "dash"})
	if err != nil {
		tb.Fatalf("claim %s: %v", lane, err)
	}
	if _, err := p.Settle(context.Background(), lease.Settlement{RunID: l.RunID, Outcome: outcome, RetryIn: time.Hour}); err != nil {
		tb.Fatalf("settle run %d: %v", l.RunID, err)
	}
	return l
}

func TestProvider_FindTasks(t *testing.T) {
	ctx := context.Background()
	p := MustOpen(t)
	var ids []int64
	for i := range 7 {
		lane := "a"
		if i%2 == 1 {
			lane = "b"
		}
		ids = append(ids, MustEnqueue(t, p, lease.EnqueueParams{Lane: lane, Agent: "w",
			Payload: []byte(fmt.Sprintf(`{"n":%d,"name":"Needle-%d"}`, i, i%3))}))
	}
	t.Run("Keyset", func(t *testing.T) {
		// Ensure pages follow each other by id, newest first, with no task
		// twice and none left out.
		var got []int64
		before := int64(0)
		for {
			ts, err := p.FindTasks(ctx, lease.TaskQuery{Before: before, Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) == 0 {
				break
			}
			for _, x := range ts {
				got = append(got, x.ID)
			}
			before = ts[len(ts)-1].ID
		}
		if fmt.Sprint(got) != fmt.Sprint(reversed(ids)) {
			t.Errorf("got %v, want %v", got, reversed(ids))
		}
	})
	t.Run("Filters", func(t *testing.T) {
		// Ensure lane, text (case-insensitive) and time range each narrow
		// the listing and the count agrees with it.
		for _, c := range []struct {
			q    lease.TaskQuery
			want int
		}{
			{lease.TaskQuery{Lane: "b"}, 3},
			{lease.TaskQuery{Text: "needle-1"}, 2},
			{lease.TaskQuery{Lane: "a", Text: "NEEDLE-0"}, 2},
			{lease.TaskQuery{From: time.Now().Add(-time.Hour)}, 7},
			{lease.TaskQuery{From: time.Now().Add(time.Hour)}, 0},
			{lease.TaskQuery{To: time.Now().Add(-time.Hour)}, 0},
			{lease.TaskQuery{State: lease.TaskFailed}, 0},
		} {
			ts, err := p.FindTasks(ctx, c.q)
			if err != nil {
				t.Fatal(err)
			}
			n, err := p.CountTasks(ctx, c.q)
			if err != nil {
				t.Fatal(err)
			}
			if len(ts) != c.want || n.N != int64(c.want) || n.Estimated {
				t.Errorf("%+v: got %d tasks, count %+v; want %d", c.q, len(ts), n, c.want)
			}
		}
	})
}

func reversed(xs []int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[len(xs)-1-i] = x
	}
	return out
}

// Ensure a count past CountCap is the planner's estimate and says so.
func TestProvider_CountTasksEstimates(t *testing.T) {
	p := MustOpen(t)
	conn := MustConn(t)
	s := p.Schema()
	mustExec(t, conn, fmt.Sprintf(`INSERT INTO %[1]s.lanes (name) VALUES ('big')`, s))
	mustExec(t, conn, fmt.Sprintf(`INSERT INTO %[1]s.tasks (lane, agent, payload, payload_text, max_attempts, state, finished_at)
		SELECT 'big', 'a', '{}', '{}', 3, 'done', now() FROM generate_series(1, %d) i`, s, pg.CountCap+5000))
	mustExec(t, conn, fmt.Sprintf(`ANALYZE %s.tasks`, s))
	n, err := p.CountTasks(context.Background(), lease.TaskQuery{Lane: "big"})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Estimated || n.N < pg.CountCap {
		t.Errorf("got %+v, want an estimate of about %d", n, pg.CountCap+5000)
	}
	// Ensure a count that runs out of its budget settles for the estimate
	// too.
	n, err = p.CountTasks(context.Background(), lease.TaskQuery{Lane: "big", State: lease.TaskDone, CountBudget: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if !n.Estimated {
		t.Errorf("count over its budget: got %+v, want an estimate", n)
	}
}

func TestProvider_Bulk(t *testing.T) {
	ctx := context.Background()
	p := MustOpen(t)
	for i := range 5 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "x", Agent: "w", MaxAttempts: 1, DedupeKey: map[bool]string{true: "k"}[i == 0]})
	}
	MustEnqueue(t, p, lease.EnqueueParams{Lane: "y", Agent: "w"})
	for range 3 {
		MustSettle(t, p, "x", lease.RunFailed)
	}
	t.Run("Retry", func(t *testing.T) {
		// Ensure bulk retry queues again exactly the failed tasks the filter
		// selects, the one with a dedupe key too.
		n, err := p.BulkRetry(ctx, lease.TaskQuery{Lane: "x"})
		if err != nil || n != 3 {
			t.Fatalf("got %d, %v; want 3 retried", n, err)
		}
		c, _ := p.CountTasks(ctx, lease.TaskQuery{Lane: "x", State: lease.TaskQueued})
		if c.N != 5 {
			t.Errorf("queued in x after retry: got %d, want 5", c.N)
		}
	})
	t.Run("Cancel", func(t *testing.T) {
		// Ensure bulk cancel cancels the queued tasks the filter selects
		// and leaves the other lane's alone.
		n, err := p.BulkCancel(ctx, lease.TaskQuery{Lane: "x"})
		if err != nil || n != 5 {
			t.Fatalf("got %d, %v; want 5 cancelled", n, err)
		}
		c, _ := p.CountTasks(ctx, lease.TaskQuery{State: lease.TaskQueued})
		if c.N != 1 {
			t.Errorf("queued after cancel: got %d, want the one of lane y", c.N)
		}
	})
}

func TestProvider_RunsBetween(t *testing.T) {
	ctx := context.Background()
	p := MustOpen(t)
	start := time.Now().Add(-time.Minute)
	for range 3 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "t", Agent: "w"})
	}
	done := MustSettle(t, p, "t", lease.RunCompleted)
	MustSettle(t, p, "t", lease.RunFailed)
	live, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"t"}, Owner: "dash"})
	if err != nil {
		t.Fatal(err)
	}
	// Ensure every run of the window is listed once, the live one too.
	rs, n, err := p.RunsBetween(ctx, start, time.Now().Add(time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || n.N != 3 {
		t.Fatalf("got %d runs, count %+v; want 3", len(rs), n)
	}
	// Ensure a window that starts after the runs began still shows the live
	// one and none that ended before it.
	rs, _, err = p.RunsBetween(ctx, time.Now().Add(time.Second), time.Now().Add(time.Minute), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 1 || rs[0].ID != live.RunID {
		t.Errorf("later window: got %+v, want only run %d", rs, live.RunID)
	}
	// Ensure the agent's last outcome is its latest ended run.
	last, err := p.LastOutcomes(ctx, []string{"w", "nobody"})
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 1 || last[0].ID != done.RunID+1 || last[0].State != lease.RunFailed {
		t.Errorf("last outcomes: got %+v, want run %d failed", last, done.RunID+1)
	}
	// Ensure throughput counts the two finished runs by outcome and the
	// three starts.
	from := time.Now().Add(-10 * time.Minute).Truncate(time.Minute)
	bs, err := p.Throughput(ctx, from, from.Add(20*time.Minute), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var completed, failed, started int64
	for _, b := range bs {
		completed += b.Finished[lease.RunCompleted]
		failed += b.Finished[lease.RunFailed]
		started += b.Started
	}
	if completed != 1 || failed != 1 || started != 3 {
		t.Errorf("throughput: got %d completed, %d failed, %d started; want 1, 1, 3", completed, failed, started)
	}
}

// Ensure the dashboard's reads use indexes, not sequential scans, with a
// history of finished tasks and runs.
func TestProvider_DashboardPlans(t *testing.T) {
	ctx := context.Background()
	p := MustOpen(t)
	conn := MustConn(t)
	s := p.Schema()
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO %[1]s.lanes (name) SELECT 'h' || i FROM generate_series(0, 9) i`, s),
		fmt.Sprintf(`INSERT INTO %[1]s.tasks (lane, agent, payload, payload_text, run_after, attempts, max_attempts, state, created_at, finished_at)
			SELECT 'h' || (i %% 10), 'a' || (i %% 7), '{}', '{}', now() - i * interval '1 second', 1, 3,
				CASE WHEN i %% 100 = 0 THEN 'failed' ELSE 'done' END,
				now() - i * interval '1 second', now() - i * interval '1 second'
			FROM generate_series(1, 100000) i`, s),
		fmt.Sprintf(`INSERT INTO %[1]s.runs (task_id, lane, agent, attempt, owner, state, started_at, lease_expires_at, finished_at)
			SELECT id, lane, agent, 1, 'old', 'completed', finished_at, finished_at, finished_at FROM %[1]s.tasks`, s),
		fmt.Sprintf(`ANALYZE %[1]s.lanes, %[1]s.tasks, %[1]s.runs`, s),
	} {
		mustExec(t, conn, q)
	}
	day := time.Now().Add(-24 * time.Hour)
	for _, q := range []struct {
		name string
		sql  string
		args []any
	}{
		{"state", `SELECT t.id FROM %s.tasks t WHERE t.state = $1 ORDER BY t.id DESC LIMIT 50`, []any{"failed"}},
		{"lane", `SELECT t.id FROM %s.tasks t WHERE t.lane = $1 AND t.id < $2 ORDER BY t.id DESC LIMIT 50`, []any{"h3", 90000}},
		{"agent", `SELECT t.id FROM %s.tasks t WHERE t.agent = $1 ORDER BY t.id DESC LIMIT 50`, []any{"a3"}},
		{"created", `SELECT x.id FROM %s.tasks x WHERE x.created_at >= $1 ORDER BY x.created_at LIMIT 1`, []any{day}},
		{"started", `SELECT r.id FROM %s.runs r WHERE r.started_at >= $1 AND r.started_at < $2 ORDER BY r.started_at DESC LIMIT 100`, []any{day, time.Now()}},
		{"finished", `SELECT count(*) FROM %s.runs r WHERE r.finished_at IS NOT NULL AND r.finished_at >= $1`, []any{time.Now().Add(-time.Hour)}},
		{"last", `SELECT r.id FROM %s.runs r WHERE r.agent = $1 AND r.state <> 'running' ORDER BY r.id DESC LIMIT 1`, []any{"a2"}},
	} {
		var plan string
		rows, err := conn.Query(ctx, "EXPLAIN "+fmt.Sprintf(q.sql, s), q.args...)
		if err != nil {
			t.Fatalf("%s: %v", q.name, err)
		}
		for rows.Next() {
			var line string
			_ = rows.Scan(&line)
			plan += line + "\n"
		}
		rows.Close()
		if strings.Contains(plan, "Seq Scan") {
			t.Errorf("%s: sequential scan:\n%s", q.name, plan)
		}
	}
}
