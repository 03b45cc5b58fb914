package pg_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

func intp(n int) *int    { return &n }
func boolp(b bool) *bool { return &b }

// Ensure the claim runs at READ COMMITTED even when the server's default
// is REPEATABLE READ: racing claims on a limit-1 lane never hold two live
// runs at once.
func TestClaim_ReadCommittedUnderRepeatableRead(t *testing.T) {
	u, schema := MustSchemaURL(t, nil)
	u += "&default_transaction_isolation=repeatable%20read"
	p := MustOpenURL(t, u, true)
	ctx := context.Background()
	var iso string
	if err := p.Pool().QueryRow(ctx, "SHOW default_transaction_isolation").Scan(&iso); err != nil || iso != "repeatable read" {
		t.Fatalf("test setup: default_transaction_isolation = %q, %v; want repeatable read", iso, err)
	}
	const tasks = 40
	for range tasks {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "one", Agent: "a"})
	}
	var live, maxLive, done atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for done.Load() < tasks {
				l, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"one"}, Owner: "racer", Lease: time.Minute})
				if errors.Is(err, lease.ErrNoWork) {
					time.Sleep(time.Millisecond)
					continue
				}
				if err != nil {
					errc <- err
					return
				}
				n := live.Add(1)
				for m := maxLive.Load(); n > m && !maxLive.CompareAndSwap(m, n); m = maxLive.Load() {
				}
				time.Sleep(2 * time.Millisecond)
				live.Add(-1)
				errs, err := p.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted})
				if err == nil {
					err = errs[0]
				}
				if err != nil {
					errc <- err
					return
				}
				done.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("racing claim: %v", err)
	}
	if got := maxLive.Load(); got != 1 {
		t.Errorf("at most %d runs were live at once in a lane of limit 1, want 1", got)
	}
	// The database agrees: no run started before the previous one ended.
	var overlaps int
	err := p.Pool().QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %[1]s.runs a JOIN %[1]s.runs b
		ON a.id < b.id AND b.started_at < a.finished_at AND a.started_at < b.finished_at`, schema)).Scan(&overlaps)
	if err != nil || overlaps != 0 {
		t.Errorf("overlapping runs in a lane of limit 1: %d (%v)", overlaps, err)
	}
}

// waitBackend returns the pid of the backend running a claim of schema
// that waits on wait (a wait_event). It fails the test if the claim ends
// first (its result arrives on done) or never waits. conn must not be in
// a transaction: pg_stat_activity holds still for a transaction's length.
func waitBackend(t *testing.T, conn *pgx.Conn, schema, wait string, done <-chan error) int32 {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-done:
			t.Fatalf("claim ended (%v) instead of waiting on %s", err, wait)
		default:
		}
		var pid int32
		err := conn.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
			WHERE query LIKE '%' || $1 || '%.claim(%' AND wait_event = $2 AND pid <> pg_backend_pid()`,
			schema, wait).Scan(&pid)
		if err == nil {
			return pid
		}
		time.Sleep(10 * time.Millisecond)
	}
	rows, err := conn.Query(context.Background(), `SELECT pid, coalesce(wait_event, ''), state, left(query, 120)
		FROM pg_stat_activity WHERE query LIKE '%' || $1 || '%'`, schema)
	if err == nil {
		for rows.Next() {
			var pid int32
			var ev, state, q string
			if rows.Scan(&pid, &ev, &state, &q) == nil {
				t.Logf("backend %d: %s, %s: %s", pid, state, ev, q)
			}
		}
	}
	t.Fatalf("no claim waiting on %s", wait)
	return 0
}

// Ensure a claim whose connection dies mid-transaction leaves no trace:
// no run, the task still queued with its attempts untouched, and the next
// claim takes it normally.
func TestClaim_AtomicWhenBackendKilled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		wait  string
		block func(t *testing.T, other *pgx.Conn, schema string)
	}{
		{"WaitingOnLaneLock", "advisory", func(t *testing.T, other *pgx.Conn, schema string) {
			mustExec(t, other, "BEGIN")
			mustExec(t, other, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, %s.lane_key('k'))", pg.LaneLockSpace, schema))
		}},
		{"AfterTaskUpdate", "PgSleep", func(t *testing.T, other *pgx.Conn, schema string) {
			// The run insert sleeps, after the task row was already updated.
			mustExec(t, other, fmt.Sprintf(`CREATE FUNCTION %[1]s.stall() RETURNS trigger LANGUAGE plpgsql AS
				$$ BEGIN PERFORM pg_sleep(60); RETURN NEW; END $$;
				CREATE TRIGGER stall BEFORE INSERT ON %[1]s.runs FOR EACH ROW EXECUTE FUNCTION %[1]s.stall()`, schema))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, schema := MustSchemaURL(t, nil)
			p := MustOpenURL(t, u, true)
			ctx := context.Background()
			id := MustEnqueue(t, p, lease.EnqueueParams{Lane: "k", Agent: "a"})
			other := MustConn(t)
			tc.block(t, other, schema)

			errc := make(chan error, 1)
			go func() {
				_, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"k"}, Owner: "victim"})
				errc <- err
			}()
			watcher := MustConn(t)
			pid := waitBackend(t, watcher, schema, tc.wait, errc)
			var ok bool
			if err := watcher.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
				t.Fatalf("terminate backend %d: %v %v", pid, ok, err)
			}
			if err := <-errc; err == nil {
				t.Fatal("claim on a killed connection succeeded")
			}
			if tc.wait == "advisory" {
				mustExec(t, other, "ROLLBACK")
			} else {
				mustExec(t, other, fmt.Sprintf("DROP TRIGGER stall ON %s.runs", schema))
			}
			tk := MustTask(t, p, id)
			if tk.State != lease.TaskQueued || tk.Attempts != 0 {
				t.Fatalf("task after a killed claim: state %s, attempts %d; want queued, 0", tk.State, tk.Attempts)
			}
			if runs, err := p.Runs(ctx, lease.RunFilter{TaskID: id}); err != nil || len(runs) != 0 {
				t.Fatalf("runs after a killed claim: %d (%v), want none", len(runs), err)
			}
			l := MustClaim(t, p, lease.ClaimParams{Lanes: []string{"k"}, Owner: "next"})
			if l.TaskID != id || l.Attempt != 1 {
				t.Fatalf("claim after a killed claim: task %d attempt %d; want %d, 1", l.TaskID, l.Attempt, id)
			}
		})
	}
}

func mustExec(t *testing.T, conn *pgx.Conn, sql string) {
	t.Helper()
	if _, err := conn.Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// Ensure a claim over several lanes skips a lane whose lock another claimer
// holds, and waits rather than answering "nothing" when every candidate
// lane is locked.
func TestClaim_LockedLanes(t *testing.T) {
	u, schema := MustSchemaURL(t, nil)
	p := MustOpenURL(t, u, true)
	ctx := context.Background()
	MustEnqueue(t, p, lease.EnqueueParams{Lane: "busy", Agent: "a", Priority: -10})
	free := MustEnqueue(t, p, lease.EnqueueParams{Lane: "free", Agent: "a"})
	other := MustConn(t)
	lock := func(lane string) {
		mustExec(t, other, fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, %s.lane_key('%s'))", pg.LaneLockSpace, schema, lane))
	}
	mustExec(t, other, "BEGIN")
	lock("busy")

	t.Run("SkipsLockedLane", func(t *testing.T) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		l, err := p.Claim(cctx, lease.ClaimParams{Owner: "o"})
		if err != nil || l.TaskID != free {
			t.Fatalf("claim while lane busy is locked: %+v, %v; want task %d of lane free", l, err, free)
		}
	})

	t.Run("WaitsWhenAllLocked", func(t *testing.T) {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "busy2", Agent: "a"})
		lock("busy2")
		got := make(chan error, 1)
		go func() {
			_, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"busy", "busy2"}, Owner: "o"})
			got <- err
		}()
		waitBackend(t, MustConn(t), schema, "advisory", got)
		mustExec(t, other, "COMMIT")
		if err := <-got; err != nil {
			t.Fatalf("claim after the locks were released: %v, want a lease", err)
		}
	})
}

// Ensure ClaimMany takes several tasks over several lanes in one call
// without taking any lane past its limit or touching a paused lane.
func TestClaimMany_Limits(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "two", MaxRunning: intp(2)}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "stopped", Paused: boolp(true)}); err != nil {
		t.Fatal(err)
	}
	for _, lane := range []string{"two", "one", "stopped"} {
		for range 3 {
			MustEnqueue(t, p, lease.EnqueueParams{Lane: lane, Agent: "a"})
		}
	}
	ls, err := p.ClaimMany(ctx, lease.ClaimParams{Owner: "o"}, 10)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, l := range ls {
		per[l.Lane]++
	}
	if len(ls) != 3 || per["two"] != 2 || per["one"] != 1 {
		t.Fatalf("claim many took %v, want two from lane two and one from lane one", per)
	}
	if more, err := p.ClaimMany(ctx, lease.ClaimParams{Owner: "o"}, 10); err != nil || len(more) != 0 {
		t.Fatalf("claim many with every lane full: %d leases, %v; want none", len(more), err)
	}
	lanes, err := p.Lanes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lanes {
		want := map[string][2]int{"one": {1, 2}, "two": {2, 1}, "stopped": {0, 3}}[l.Name]
		if l.Running != want[0] || l.Queued != want[1] || l.OldestQueued.IsZero() {
			t.Errorf("lane %s: running %d queued %d oldest %v; want %d, %d and a time", l.Name, l.Running, l.Queued, l.OldestQueued, want[0], want[1])
		}
	}
}

// Ensure a claim over several lanes whose first lanes hold fewer tasks
// than their limits allow goes on to the later lanes for the rest: each
// lane's share is taken together, and a share left short is made up.
func TestClaimMany_ShortLanesMadeUp(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	queued := map[string]int{"a": 1, "b": 2, "c": 10}
	for _, lane := range []string{"a", "b", "c"} {
		if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: lane, MaxRunning: intp(5)}); err != nil {
			t.Fatal(err)
		}
		for range queued[lane] {
			MustEnqueue(t, p, lease.EnqueueParams{Lane: lane, Agent: "a"})
		}
	}
	ls, err := p.ClaimMany(ctx, lease.ClaimParams{Lanes: []string{"a", "b", "c"}, Agent: "a", Owner: "o"}, 8)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, l := range ls {
		per[l.Lane]++
	}
	if len(ls) != 8 || per["a"] != 1 || per["b"] != 2 || per["c"] != 5 {
		t.Fatalf("claim of 8 over lanes of 1, 2 and 10 tasks (limit 5 each) took %v, want a 1, b 2, c 5", per)
	}
	// The rest of lane c: its limit allows none more.
	if more, err := p.ClaimMany(ctx, lease.ClaimParams{Lanes: []string{"a", "b", "c"}, Agent: "a", Owner: "o"}, 8); err != nil || len(more) != 0 {
		t.Fatalf("claim with lane c at its limit: %d leases, %v; want none", len(more), err)
	}
}
