package leasetest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure an enqueue fills its defaults and keeps what it was given.
func testEnqueueDefaults(t *testing.T, p lease.Provider) {
	id := mustEnqueue(t, p, lease.EnqueueParams{Agent: "a"})
	tk := MustTask(t, p, id)
	if tk.Lane != lease.DefaultLane || string(tk.Payload) != "{}" || tk.MaxAttempts != lease.DefaultMaxAttempts ||
		tk.Priority != 0 || tk.State != lease.TaskQueued || tk.Attempts != 0 || tk.CreatedAt.IsZero() ||
		tk.CancelRequested || !tk.FinishedAt.IsZero() || tk.ParentRun != 0 {
		t.Fatalf("task with defaults: got %+v", tk)
	}
	if tk.RunAfter.After(tk.CreatedAt.Add(time.Second)) {
		t.Errorf("task with no delay runs after %v, created %v", tk.RunAfter, tk.CreatedAt)
	}
	lanes, err := p.Lanes(context.Background())
	if err != nil || len(lanes) != 1 {
		t.Fatalf("lanes after the first enqueue: got %+v, %v; want the default lane", lanes, err)
	}
	if l := lanes[0]; l.Name != lease.DefaultLane || l.MaxRunning != 1 || l.Paused || l.Queued != 1 || l.Running != 0 {
		t.Errorf("lane created by enqueue: got %+v, want limit 1, not paused, one queued", l)
	}

	delayed := task("later", "a")
	delayed.Delay = time.Hour
	tk = MustTask(t, p, mustEnqueue(t, p, delayed))
	if !near(tk.RunAfter, tk.CreatedAt.Add(time.Hour), time.Second) {
		t.Errorf("task delayed an hour: runs after %v, created %v", tk.RunAfter, tk.CreatedAt)
	}
	at := time.Now().Add(-90 * time.Minute).Truncate(time.Millisecond)
	ep := task("at", "a")
	ep.RunAfter, ep.Priority, ep.MaxAttempts, ep.DedupeKey, ep.ParentRun = at, -7, 9, "key-at", 42
	tk = MustTask(t, p, mustEnqueue(t, p, ep))
	if !tk.RunAfter.Equal(at) || tk.Priority != -7 || tk.MaxAttempts != 9 || tk.DedupeKey != "key-at" || tk.ParentRun != 42 {
		t.Errorf("task with every field: got %+v", tk)
	}
}

// Ensure a dedupe key returns the unfinished task that holds it, even under
// racing enqueues, and is free again once that task finishes.
func testEnqueueDedupe(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	ep := task("dedupe", "a")
	ep.DedupeKey, ep.Payload = "k1", []byte(`{"v":1}`)
	id := mustEnqueue(t, p, ep)
	dup := ep
	dup.Payload = []byte(`{"v":2}`)
	checkDup := func(what string) {
		t.Helper()
		got, existed, err := p.Enqueue(ctx, dup)
		if err != nil || got != id || !existed {
			t.Fatalf("enqueue with the key of a %s task: got %d, %v, %v; want %d, true", what, got, existed, err, id)
		}
	}
	checkDup("queued")
	if tk := MustTask(t, p, id); string(tk.Payload) != `{"v":1}` {
		t.Errorf("a duplicate enqueue changed the payload to %s", tk.Payload)
	}
	if n := len(mustTasks(t, p, lease.TaskFilter{})); n != 1 {
		t.Errorf("a duplicate enqueue wrote a task: %d tasks, want 1", n)
	}
	l := MustClaim(t, p, claimIn("dedupe"))
	checkDup("running")
	mustSettle(t, p, complete(l.RunID))
	if got, existed, err := p.Enqueue(ctx, dup); err != nil || existed || got == id {
		t.Fatalf("enqueue with the key of a done task: got %d, %v, %v; want a new task", got, existed, err)
	}
	plain := task("dedupe", "a")
	if mustEnqueue(t, p, plain) == mustEnqueue(t, p, plain) {
		t.Errorf("two enqueues without a key returned the same task")
	}

	ep.DedupeKey = "k2"
	var mu sync.Mutex
	got := map[int64]int{}
	var created atomic.Int64
	race(16, func(int) {
		id, existed, err := p.Enqueue(ctx, ep)
		if err != nil {
			t.Errorf("racing enqueue: %v", err)
			return
		}
		if !existed {
			created.Add(1)
		}
		mu.Lock()
		got[id]++
		mu.Unlock()
	})
	if len(got) != 1 || created.Load() != 1 {
		t.Errorf("16 racing enqueues with one key: got ids %v, %d created; want one id, created once", got, created.Load())
	}
}

// Ensure malformed requests are refused with ErrInvalid and write nothing.
func testEnqueueInvalid(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	big := []byte(`"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"`)
	for name, ep := range map[string]lease.EnqueueParams{
		"bad lane":               {Lane: "Bad Lane", Agent: "a"},
		"bad agent":              {Lane: "ok", Agent: "-a"},
		"no agent":               {Lane: "ok"},
		"payload not JSON":       {Lane: "ok", Agent: "a", Payload: []byte(`{"a":`)},
		"payload too large":      {Lane: "ok", Agent: "a", Payload: big},
		"negative attempts":      {Lane: "ok", Agent: "a", MaxAttempts: -1},
		"negative delay":         {Lane: "ok", Agent: "a", Delay: -time.Second},
		"priority past 32 bits":  {Lane: "ok", Agent: "a", Priority: lease.MaxPriority + 1},
		"priority below 32 bits": {Lane: "ok", Agent: "a", Priority: lease.MinPriority - 1},
		"attempts past 32 bits":  {Lane: "ok", Agent: "a", MaxAttempts: lease.MaxMaxAttempts + 1},
		"key too long":           {Lane: "ok", Agent: "a", DedupeKey: strings.Repeat("k", lease.MaxDedupeKeyBytes+1)},
		"key with NUL":           {Lane: "ok", Agent: "a", DedupeKey: "a\x00b"},
		"payload with NUL":       {Lane: "ok", Agent: "a", Payload: []byte(`{"s": "\u0000"}`)},
		"payload not UTF-8":      {Lane: "ok", Agent: "a", Payload: []byte("\"\xff\"")},
	} {
		if _, _, err := p.Enqueue(ctx, ep); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("enqueue with %s: got %v, want ErrInvalid", name, err)
		}
	}
	if ts := mustTasks(t, p, lease.TaskFilter{}); len(ts) != 0 {
		t.Errorf("refused enqueues wrote %d tasks", len(ts))
	}
	if ls, err := p.Lanes(ctx); err != nil || len(ls) != 0 {
		t.Errorf("refused enqueues left lanes %+v, %v", ls, err)
	}
	for name, cp := range map[string]lease.ClaimParams{
		"negative lease": {Owner: "o", Lease: -time.Second},
		"no owner":       {Lease: time.Second},
		"bad lane":       {Owner: "o", Lanes: []string{"ok", "NOT OK"}},
		"bad agent":      {Owner: "o", Agent: "Agent!"},
	} {
		if _, err := p.Claim(ctx, cp); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("claim with %s: got %v, want ErrInvalid", name, err)
		}
	}
	neg, zero, one, huge := -1, 0, 1, lease.MaxLaneLimit+1
	for name, u := range map[string]lease.LaneUpdate{
		"bad name":           {Name: "a b", MaxRunning: &one},
		"zero limit":         {Name: "ok", MaxRunning: &zero},
		"negative limit":     {Name: "ok", MaxRunning: &neg},
		"limit past 32 bits": {Name: "ok", MaxRunning: &huge},
	} {
		if _, err := p.SetLane(ctx, u); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("set lane with %s: got %v, want ErrInvalid", name, err)
		}
	}
	if _, err := p.ClaimMany(ctx, lease.ClaimParams{Owner: "o"}, 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("claim many of 0: got %v, want ErrInvalid", err)
	}
	if _, err := p.AbandonOwner(ctx, "", []string{"i"}, "gone"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("abandon owner with no owner: got %v, want ErrInvalid", err)
	}
	if ls, err := p.Lanes(ctx); err != nil || len(ls) != 0 {
		t.Errorf("refused lane changes left lanes %+v, %v", ls, err)
	}
}
