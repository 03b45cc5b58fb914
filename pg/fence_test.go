package pg_test

import (
	"context"
	"errors"
	"testing"

	"github.com/qd-run/qd/lease"
)

// Ensure a heartbeat or a settlement that carries another claim's token
// than the run's is refused as for a lost run, even though the run id
// matches a live run: a database that lost a run (a failover to a copy
// behind) gives its id out again, and the old holder's beats and outcome
// must not land on the new run.
func TestFence_ClaimTokenOfAnotherClaim(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	MustEnqueue(t, p, lease.EnqueueParams{Lane: "fence", Agent: "a"})
	l, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"fence"}, Owner: "o", Instance: "i"})
	if err != nil {
		t.Fatal(err)
	}
	if l.ClaimToken == "" {
		t.Fatal("the lease carries no claim token")
	}
	stale := "an-earlier-claim"
	res, err := p.Heartbeat(ctx, lease.Beat{RunID: l.RunID, ClaimToken: stale})
	if err != nil || len(res) != 1 || !errors.Is(res[0].Err, lease.ErrLeaseLost) {
		t.Fatalf("heartbeat with another claim's token: %+v, %v; want lease lost", res, err)
	}
	errs, err := p.Settle(ctx, lease.Settlement{RunID: l.RunID, ClaimToken: stale, Outcome: lease.RunCompleted})
	if err != nil || len(errs) != 1 || errs[0] == nil {
		t.Fatalf("settle with another claim's token: %v, %v; want refused", errs, err)
	}
	if r := MustRun(t, p, l.RunID); r.State != lease.RunRunning {
		t.Fatalf("run %d is %s after a stale settlement, want running", l.RunID, r.State)
	}
	res, err = p.Heartbeat(ctx, lease.Beat{RunID: l.RunID, ClaimToken: l.ClaimToken})
	if err != nil || res[0].Err != nil {
		t.Fatalf("heartbeat with the run's own token: %+v, %v", res, err)
	}
	errs, err = p.Settle(ctx, lease.Settlement{RunID: l.RunID, ClaimToken: l.ClaimToken, Outcome: lease.RunCompleted})
	if err != nil || errs[0] != nil {
		t.Fatalf("settle with the run's own token: %v, %v", errs, err)
	}
}
