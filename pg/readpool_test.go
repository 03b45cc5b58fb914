package pg_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// Ensure the lease path never waits on the read pool: with every one of
// its connections taken (by a flood of dashboard pages, say), a claim, a
// heartbeat, a cancel poll and a settle still go through at once, while a
// listing and the dashboard's own writes wait for a read connection. The
// read pool's statements carry their timeout.
func TestProvider_ReadPoolApart(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	if _, _, err := p.Enqueue(ctx, lease.EnqueueParams{Lane: "a", Agent: "w"}); err != nil {
		t.Fatal(err)
	}
	var held []*pgxpool.Conn
	for range pg.ReadConns {
		c, err := p.ReadPool().Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	var timeout string
	if err := held[0].QueryRow(ctx, "SHOW statement_timeout").Scan(&timeout); err != nil || timeout != "15s" {
		t.Errorf("read pool's statement_timeout: %q, %v; want 15s", timeout, err)
	}

	quick, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	l, err := p.Claim(quick, lease.ClaimParams{Lanes: []string{"a"}, Owner: "t", Lease: time.Minute})
	if err != nil {
		t.Fatalf("claim with the read pool taken: %v", err)
	}
	if rs, err := p.Heartbeat(quick, lease.Beat{RunID: l.RunID, Lease: time.Minute}); err != nil || rs[0].Err != nil {
		t.Errorf("heartbeat with the read pool taken: %v %v", err, rs)
	}
	if _, err := p.CancelRequested(quick, []int64{l.RunID}); err != nil {
		t.Errorf("cancel poll with the read pool taken: %v", err)
	}
	if errs, err := p.Settle(quick, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted}); err != nil || errs[0] != nil {
		t.Errorf("settle with the read pool taken: %v %v", err, errs)
	}

	for name, do := range map[string]func(context.Context) error{
		"a listing": func(ctx context.Context) error { _, err := p.Tasks(ctx, lease.TaskFilter{}); return err },
		"lanes":     func(ctx context.Context) error { _, err := p.Lanes(ctx); return err },
		"the dashboard's enqueue": func(ctx context.Context) error {
			_, _, err := p.Dashboard().Enqueue(ctx, lease.EnqueueParams{Lane: "a", Agent: "w"})
			return err
		},
		"the dashboard's pause": func(ctx context.Context) error {
			paused := true
			_, err := p.Dashboard().SetLane(ctx, lease.LaneUpdate{Name: "a", Paused: &paused})
			return err
		},
	} {
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		if err := do(short); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s with the read pool taken: %v; want it to wait for a read connection", name, err)
		}
		cancel()
	}
	for _, c := range held {
		c.Release()
	}
	if _, err := p.Tasks(ctx, lease.TaskFilter{}); err != nil {
		t.Errorf("a listing once the read pool is free: %v", err)
	}
}
