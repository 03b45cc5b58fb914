package pg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure many goroutines enqueueing one dedupe key get one task.
func TestEnqueue_DedupeRace(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	const n = 24
	ids := make([]int64, n)
	existed := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ids[i], existed[i], errs[i] = p.Enqueue(ctx, lease.EnqueueParams{Lane: "fresh", Agent: "a", DedupeKey: "k"})
		}()
	}
	wg.Wait()
	fresh := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("enqueue %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("enqueue %d got task %d, enqueue 0 got %d", i, ids[i], ids[0])
		}
		if !existed[i] {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d enqueues created the task, want 1", fresh)
	}
	if ts, err := p.Tasks(ctx, lease.TaskFilter{}); err != nil || len(ts) != 1 {
		t.Errorf("tasks after the race: %d (%v), want 1", len(ts), err)
	}
	// Once the task is finished, the key is free again.
	l := MustClaim(t, p, lease.ClaimParams{Owner: "o"})
	if err := settle1(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted}); err != nil {
		t.Fatal(err)
	}
	id, ex, err := p.Enqueue(ctx, lease.EnqueueParams{Lane: "fresh", Agent: "a", DedupeKey: "k"})
	if err != nil || ex || id == ids[0] {
		t.Errorf("enqueue after the keyed task finished: %d, existed %v, %v; want a new task", id, ex, err)
	}
}

// Ensure the payload reaches the claimer byte for byte, whatever its
// whitespace and key order, though the database also keeps it as jsonb.
func TestEnqueue_PayloadByteExact(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	payload := "{ \"z\" :1,\n\t\"a\":[1, 2,3] ,  \"é\":\"\\u00e9\\\\u0000\", \"z2\": 1.50 }"
	id := MustEnqueue(t, p, lease.EnqueueParams{Agent: "a", Payload: []byte(payload)})
	l := MustClaim(t, p, lease.ClaimParams{Owner: "o"})
	if string(l.Payload) != payload {
		t.Errorf("claimed payload:\n%q\nwant\n%q", l.Payload, payload)
	}
	if tk := MustTask(t, p, id); string(tk.Payload) != payload {
		t.Errorf("task payload:\n%q\nwant\n%q", tk.Payload, payload)
	}
	var z string
	err := p.Pool().QueryRow(ctx, "SELECT payload->>'z2' FROM "+p.Schema()+".tasks WHERE id = $1", id).Scan(&z)
	if err != nil || z != "1.50" {
		t.Errorf("payload as jsonb: z2 = %q (%v)", z, err)
	}
}

// Ensure payloads PostgreSQL cannot store are refused with a clear
// ErrInvalid, and nothing is written.
func TestEnqueue_InvalidPayload(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	for _, c := range []struct{ payload, want string }{
		{`{"a":"\u0000"}`, `\u0000`},
		{`["x\u0000y"]`, `\u0000`},
		{"{\"a\":\"\xff\"}", "UTF-8"},
		{`{"a":`, "not valid JSON"},
	} {
		_, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a", Payload: []byte(c.payload)})
		if !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("enqueue %q: %v, want ErrInvalid mentioning %s", c.payload, err, c.want)
		}
	}
	if ts, err := p.Tasks(ctx, lease.TaskFilter{}); err != nil || len(ts) != 0 {
		t.Errorf("refused enqueues wrote %d tasks (%v)", len(ts), err)
	}
}

// Ensure a periodic schedule enqueues exactly once per tick however many
// daemons race to record it.
func TestPeriodicTick_ExactlyOnce(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	tick := time.Date(2025, 1, 2, 3, 4, 0, 0, time.UTC)
	var wg sync.WaitGroup
	fired := make(chan bool, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, err := p.PeriodicTick(ctx, "nightly", tick, lease.EnqueueParams{Lane: "cron", Agent: "a"})
			if err != nil {
				t.Error(err)
			}
			fired <- ok
		}()
	}
	wg.Wait()
	close(fired)
	n := 0
	for ok := range fired {
		if ok {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d callers recorded the tick, want 1", n)
	}
	if ts, err := p.Tasks(ctx, lease.TaskFilter{Lane: "cron"}); err != nil || len(ts) != 1 {
		t.Errorf("tasks enqueued by the tick: %d (%v), want 1", len(ts), err)
	}
	if ok, err := p.PeriodicTick(ctx, "nightly", tick.Add(-time.Minute), lease.EnqueueParams{Lane: "cron", Agent: "a"}); ok || err != nil {
		t.Errorf("an earlier tick: %v %v, want false", ok, err)
	}
	if last, err := p.PeriodicLast(ctx, "nightly"); err != nil || !last.Equal(tick) {
		t.Errorf("last tick: %v %v, want %v", last, err, tick)
	}
	if last, err := p.PeriodicLast(ctx, "never"); err != nil || !last.IsZero() {
		t.Errorf("last tick of an unknown schedule: %v %v, want zero", last, err)
	}
}

// Ensure Prune removes finished tasks and their runs, and only those.
func TestPrune(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	doneID := MustEnqueue(t, p, lease.EnqueueParams{Lane: "p", Agent: "a"})
	l := MustClaim(t, p, lease.ClaimParams{Owner: "o"})
	if err := settle1(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted}); err != nil {
		t.Fatal(err)
	}
	queued := MustEnqueue(t, p, lease.EnqueueParams{Lane: "p", Agent: "a"})
	if res, err := p.Prune(ctx, time.Hour, false); err != nil || res.Tasks != 0 {
		t.Fatalf("prune of tasks younger than an hour: %+v %v", res, err)
	}
	dry, err := p.Prune(ctx, 0, true)
	if err != nil || dry.Tasks != 1 || dry.Runs != 1 || dry.RunIDs[0] != l.RunID {
		t.Fatalf("dry run: %+v %v", dry, err)
	}
	MustTask(t, p, doneID)
	res, err := p.Prune(ctx, 0, false)
	if err != nil || res.Tasks != 1 || len(res.RunIDs) != 1 || res.RunIDs[0] != l.RunID {
		t.Fatalf("prune: %+v %v", res, err)
	}
	if _, err := p.Task(ctx, doneID); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("pruned task: %v, want ErrNotFound", err)
	}
	if _, err := p.Run(ctx, l.RunID); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("pruned run: %v, want ErrNotFound", err)
	}
	MustTask(t, p, queued)
}

// Ensure cancel and retry follow the task's state.
func TestCancelRetry(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	q := MustEnqueue(t, p, lease.EnqueueParams{Lane: "c", Agent: "a"})
	if st, err := p.Cancel(ctx, q); err != nil || st != lease.TaskCancelled {
		t.Fatalf("cancel queued: %s %v", st, err)
	}
	if st, err := p.Cancel(ctx, q); err != nil || st != lease.TaskCancelled {
		t.Fatalf("cancel cancelled: %s %v", st, err)
	}
	if _, err := p.Cancel(ctx, 1<<40); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("cancel unknown: %v", err)
	}
	if err := p.Retry(ctx, q); err != nil {
		t.Fatalf("retry cancelled: %v", err)
	}
	if err := p.Retry(ctx, q); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("retry queued: %v, want ErrConflict", err)
	}
	l := MustClaim(t, p, lease.ClaimParams{Owner: "o"})
	if err := settle1(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted}); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Cancel(ctx, q); !errors.Is(err, lease.ErrConflict) {
		t.Fatalf("cancel done: %v, want ErrConflict", err)
	}
	if err := p.Retry(ctx, 1<<40); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("retry unknown: %v", err)
	}
}

// Ensure a periodic tick from a host whose clock runs ahead of the
// database's is refused with an error that says so, and records nothing:
// recorded, it would hold back every daemon's ticks until the database's
// clock reached it.
func TestPeriodicTick_AheadOfDatabaseClock(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	ahead := time.Now().Add(2 * time.Hour).Truncate(time.Minute)
	ok, err := p.PeriodicTick(ctx, "skewed", ahead, lease.EnqueueParams{Lane: "cron", Agent: "a"})
	if ok || err == nil || !strings.Contains(err.Error(), "ahead of the database's clock") {
		t.Fatalf("a tick two hours ahead: %v %v, want refused", ok, err)
	}
	if last, err := p.PeriodicLast(ctx, "skewed"); err != nil || !last.IsZero() {
		t.Fatalf("last tick after the refusal: %v %v, want none", last, err)
	}
	now := time.Now().Truncate(time.Second)
	if ok, err := p.PeriodicTick(ctx, "skewed", now, lease.EnqueueParams{Lane: "cron", Agent: "a"}); !ok || err != nil {
		t.Fatalf("a tick of now after the refusal: %v %v, want recorded", ok, err)
	}
}
