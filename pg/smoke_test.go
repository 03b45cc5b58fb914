package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure a task goes through enqueue, claim, heartbeat and completion.
func TestProvider_Lifecycle(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	id := MustEnqueue(t, p, lease.EnqueueParams{Lane: "a", Agent: "x", Payload: []byte(`{"b": 1,  "a":2}`)})
	l := MustClaim(t, p, lease.ClaimParams{Owner: "me", Lease: time.Minute})
	if l.TaskID != id || string(l.Payload) != `{"b": 1,  "a":2}` || l.Attempt != 1 {
		t.Fatalf("claim: got %+v", l)
	}
	if _, err := p.Claim(ctx, lease.ClaimParams{Owner: "me"}); !errors.Is(err, lease.ErrNoWork) {
		t.Fatalf("second claim: got %v, want ErrNoWork", err)
	}
	res, err := p.Heartbeat(ctx, lease.Beat{RunID: l.RunID, Lease: time.Hour, PID: 42})
	if err != nil || res[0].Err != nil || !res[0].LeaseExpiresAt.After(l.LeaseExpiresAt) {
		t.Fatalf("heartbeat: %+v, %v", res, err)
	}
	errs, err := p.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted, Summary: "ok"})
	if err != nil || errs[0] != nil {
		t.Fatalf("settle: %v %v", errs, err)
	}
	if tk := MustTask(t, p, id); tk.State != lease.TaskDone || tk.FinishedAt.IsZero() {
		t.Fatalf("task after completion: %+v", tk)
	}
	r := MustRun(t, p, l.RunID)
	if r.State != lease.RunCompleted || r.PID != 42 || r.Summary != "ok" {
		t.Fatalf("run after completion: %+v", r)
	}
	lanes, err := p.Lanes(ctx)
	if err != nil || len(lanes) != 1 || lanes[0].Name != "a" || lanes[0].MaxRunning != 1 {
		t.Fatalf("lanes: %+v %v", lanes, err)
	}
}
