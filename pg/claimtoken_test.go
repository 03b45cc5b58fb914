package pg_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// claimRow is one row the claim function answers.
type claimRow struct {
	task, run int64
	attempt   int
}

// claimWith calls the claim function in a transaction of its own on conn.
func claimWith(t *testing.T, conn *pgx.Conn, schema, lane, token string, n int) []claimRow {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	rows, err := tx.Query(ctx, fmt.Sprintf(`SELECT task_id, run_id, attempt FROM %s.claim(ARRAY[$1], NULL, 'o', 'i', '1 minute', $2, $3)`, schema),
		lane, n, token)
	if err != nil {
		t.Fatalf("claim with token %s: %v", token, err)
	}
	var out []claimRow
	for rows.Next() {
		var r claimRow
		if err := rows.Scan(&r.task, &r.run, &r.attempt); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("claim with token %s: %v", token, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	return out
}

// Ensure the claim function called twice with one token answers the same
// runs and claims nothing the second time: one run row per task, the
// task's attempt counted once, the token recorded on the run.
func TestClaim_SameTokenTwice(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "tok", MaxRunning: intp(3)}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "tok", Agent: "a"})
	}
	conn := MustConn(t)
	first := claimWith(t, conn, p.Schema(), "tok", "tok-1", 2)
	again := claimWith(t, conn, p.Schema(), "tok", "tok-1", 2)
	if len(first) != 2 || fmt.Sprint(first) != fmt.Sprint(again) {
		t.Fatalf("claim twice with token tok-1: first %v, again %v; want the same two runs", first, again)
	}
	var runs, attempts, tokened int
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE claim_token = 'tok-1') FROM %s.runs`, p.Schema())).Scan(&runs, &tokened); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT sum(attempts) FROM %s.tasks`, p.Schema())).Scan(&attempts); err != nil {
		t.Fatal(err)
	}
	if runs != 2 || tokened != 2 || attempts != 2 {
		t.Errorf("after claiming twice with one token: %d runs (%d with the token), %d attempts in all; want 2, 2, 2", runs, tokened, attempts)
	}
	for _, r := range again {
		if r.attempt != 1 {
			t.Errorf("run %d answered again with attempt %d, want 1", r.run, r.attempt)
		}
	}
	if got := claimWith(t, conn, p.Schema(), "tok", "tok-2", 2); len(got) != 1 {
		t.Errorf("claim with a new token: %d runs, want the lane's one free slot", len(got))
	}
}

// Ensure a claim that retries a token waits for an earlier call with the
// same token still inside its transaction, then answers that call's runs
// rather than claiming again.
func TestClaim_TokenWaitsForInFlight(t *testing.T) {
	p := MustOpen(t)
	ctx := context.Background()
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "fly", MaxRunning: intp(3)}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		MustEnqueue(t, p, lease.EnqueueParams{Lane: "fly", Agent: "a"})
	}
	slow := MustConn(t)
	tx, err := slow.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // committed below
	var firstRun int64
	if err := tx.QueryRow(ctx, fmt.Sprintf(`SELECT run_id FROM %s.claim(ARRAY['fly'], NULL, 'o', 'i', '1 minute', 1, 'fly-1')`, p.Schema())).Scan(&firstRun); err != nil {
		t.Fatal(err)
	}
	done := make(chan []claimRow, 1)
	go func() { done <- claimWith(t, MustConn(t), p.Schema(), "fly", "fly-1", 1) }()
	select {
	case got := <-done:
		t.Fatalf("the retry answered %v while the first call with its token was still open", got)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-done:
		if len(got) != 1 || got[0].run != firstRun {
			t.Errorf("retry after the first call committed: %v, want run %d", got, firstRun)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the retry never answered after the first call committed")
	}
}
