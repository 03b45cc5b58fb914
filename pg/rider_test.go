package pg_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

func TestTouchName_RidesOnClaims(t *testing.T) {
	// Ensure a daemon whose agents tick sends one transaction per claim and
	// none of its own to renew its name: the renewal goes out with the next
	// claim, and still lands (seen_at moves, agents are written); with no
	// claim to carry it, it goes out alone within a few seconds, and at once
	// when no claim went out for longer than that; and it still says when
	// another daemon holds the name.
	p := MustOpen(t)
	ctx := context.Background()
	me := pg.Daemon{Name: "rider", Instance: "i1", Host: "h", PID: 1, BootID: "b", Agents: []string{"a"}}
	if _, ok, err := p.ClaimName(ctx, me, "", time.Minute); err != nil || !ok {
		t.Fatalf("claim name: ok %v, %v", ok, err)
	}
	seen := func() time.Time {
		ds, err := p.Daemons(ctx)
		if err != nil || len(ds) != 1 {
			t.Fatalf("daemons: %v %v", ds, err)
		}
		return ds[0].SeenAt
	}
	before := seen()

	// Claimers ticking on an empty queue, as idle agents do.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	claims := 0
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				_, err := p.ClaimMany(ctx, lease.ClaimParams{Lanes: []string{"l"}, Owner: "rider", Instance: "i1"}, 1)
				if err != nil {
					t.Errorf("claim: %v", err)
					return
				}
				mu.Lock()
				claims++
				mu.Unlock()
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	mu.Lock()
	tx0, c0 := p.Transactions(), claims
	mu.Unlock()
	for i := range 5 {
		ok, err := p.TouchName(ctx, "rider", "i1", []string{"a", "b"})
		if err != nil || !ok {
			t.Fatalf("touch %d: ok %v, %v", i, ok, err)
		}
	}
	mu.Lock()
	tx1, c1 := p.Transactions(), claims
	mu.Unlock()
	close(stop)
	wg.Wait()
	// A claim counted after its transaction: allow for those in flight.
	if extra := (tx1 - tx0) - int64(c1-c0); extra > 3 {
		t.Errorf("5 renewals beside %d claims took %d transactions, %d more than the claims", c1-c0, tx1-tx0, extra)
	}
	if after := seen(); !after.After(before) {
		t.Errorf("seen_at %s after the renewals, was %s", after, before)
	}
	ds, _ := p.Daemons(ctx)
	if len(ds[0].Agents) != 2 {
		t.Errorf("agents %v after the renewal, want [a b]", ds[0].Agents)
	}

	// Nothing to ride on: alone, after the wait.
	start := time.Now()
	ok, err := p.TouchName(ctx, "rider", "i1", nil)
	if err != nil || !ok {
		t.Fatalf("touch with no claim: ok %v, %v", ok, err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("touch with no claim took %s", took)
	}
	// No claim since more than the wait (the last went out before the
	// touch above waited): no claim is likely to come, so it goes out at
	// once, the daemon woken once for it rather than twice.
	start = time.Now()
	ok, err = p.TouchName(ctx, "rider", "i1", nil)
	if err != nil || !ok {
		t.Fatalf("touch long after the last claim: ok %v, %v", ok, err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("touch long after the last claim took %s; it waited for a claim that was not coming", took)
	}
	// Another instance holds the name now.
	ok, err = p.TouchName(ctx, "rider", "i2", nil)
	if err != nil || ok {
		t.Errorf("touch by an instance that does not hold the name: ok %v, %v; want false", ok, err)
	}
	// A cancelled caller waiting for a claim is not left waiting.
	if _, err := p.ClaimMany(ctx, lease.ClaimParams{Lanes: []string{"l"}, Owner: "rider", Instance: "i1"}, 1); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := p.TouchName(cctx, "rider", "i1", nil); err == nil {
		t.Error("touch with a context that ended before any claim: no error")
	}
}
