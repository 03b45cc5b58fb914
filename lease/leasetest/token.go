package leasetest

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/qd-run/qd/lease"
)

// Ensure a claim asked again with its token returns the runs that claim
// made, with their attempts counted once, and claims nothing more; that a
// token whose runs ended returns none of them and still claims nothing;
// and that a token that made nothing claims normally.
func testClaimToken(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustSetLane(t, p, "tok-a", 2)
	for range 4 {
		mustEnqueue(t, p, task("tok-a", "a"))
	}
	cp := claimIn("tok-a")
	cp.Token = lease.NewClaimToken()
	first, err := p.ClaimMany(ctx, cp, 2)
	if err != nil || len(first) != 2 {
		t.Fatalf("claim with token %s: %d leases, error %v; want 2", cp.Token, len(first), err)
	}
	again, err := p.ClaimMany(ctx, cp, 2)
	if err != nil {
		t.Fatalf("claim again with token %s: %v", cp.Token, err)
	}
	if got, want := sortedRuns(again), sortedRuns(first); !slices.Equal(got, want) {
		t.Fatalf("claim again with token %s: runs %v, want the first claim's %v", cp.Token, got, want)
	}
	for _, l := range again {
		if l.Attempt != 1 || MustTask(t, p, l.TaskID).Attempts != 1 {
			t.Errorf("task %d after the same claim twice: lease attempt %d, task attempts %d; want 1 and 1",
				l.TaskID, l.Attempt, MustTask(t, p, l.TaskID).Attempts)
		}
	}
	if n := len(mustRuns(t, p, lease.RunFilter{})); n != 2 {
		t.Errorf("%d runs after the same claim twice, want 2", n)
	}

	mustSettle(t, p, complete(first[0].RunID))
	left, err := p.ClaimMany(ctx, cp, 2)
	if err != nil {
		t.Fatalf("claim a third time with token %s: %v", cp.Token, err)
	}
	if got := sortedRuns(left); !slices.Equal(got, []int64{first[1].RunID}) {
		t.Errorf("claim with token %s after run %d completed: runs %v, want only the live run %d",
			cp.Token, first[0].RunID, got, first[1].RunID)
	}
	other := cp
	other.Owner = "someone-else"
	if got, err := p.ClaimMany(ctx, other, 2); err != nil || len(got) != 0 {
		t.Errorf("claim with token %s by another owner: %d leases, error %v; want none: the token's runs are not its own", cp.Token, len(got), err)
	}

	bad := claimIn("tok-a")
	bad.Token = "two words"
	if _, err := p.ClaimMany(ctx, bad, 1); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("claim with token %q: error %v, want ErrInvalid", bad.Token, err)
	}

	fresh := claimIn("tok-a")
	fresh.Token = lease.NewClaimToken()
	got, err := p.ClaimMany(ctx, fresh, 2)
	if err != nil || len(got) != 1 {
		t.Fatalf("claim with a new token %s: %d leases, error %v; want the lane's one free slot", fresh.Token, len(got), err)
	}
	if slices.Contains(sortedRuns(first), got[0].RunID) {
		t.Errorf("claim with a new token returned run %d of the first claim", got[0].RunID)
	}
}

func sortedRuns(ls []*lease.Lease) []int64 {
	ids := make([]int64, len(ls))
	for i, l := range ls {
		ids[i] = l.RunID
	}
	slices.Sort(ids)
	return ids
}
