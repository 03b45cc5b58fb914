package memlease_test

import (
	"context"
	"errors"
	"testing"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// Ensure callers cannot change stored payloads through what they passed in
// or got back.
func TestProvider_PayloadIsCopied(t *testing.T) {
	ctx := context.Background()
	p := memlease.New()
	payload := []byte(`{"a":1}`)
	id, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a", Payload: payload})
	if err != nil {
		t.Fatal(err)
	}
	payload[2] = 'X'
	tk, _ := p.Task(ctx, id)
	tk.Payload[2] = 'Y'
	l, err := p.Claim(ctx, lease.ClaimParams{Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	l.Payload[2] = 'Z'
	if got, _ := p.Task(ctx, id); string(got.Payload) != `{"a":1}` {
		t.Fatalf("stored payload %s, want {\"a\":1}", got.Payload)
	}
}

// Ensure a cancelled context is refused before anything is written.
func TestProvider_CancelledContext(t *testing.T) {
	p := memlease.New()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("enqueue: got %v, want context.Canceled", err)
	}
	if ts, _ := p.Tasks(context.Background(), lease.TaskFilter{}); len(ts) != 0 {
		t.Fatalf("a refused enqueue wrote %d tasks", len(ts))
	}
}

// Ensure ClaimMany refuses a count below one and Ping fails once closed.
func TestProvider_ClaimManyAndClose(t *testing.T) {
	ctx := context.Background()
	p := memlease.New()
	if _, err := p.ClaimMany(ctx, lease.ClaimParams{Owner: "o"}, 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("claim many of 0: got %v, want ErrInvalid", err)
	}
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	p.Close()
	if err := p.Ping(ctx); err == nil {
		t.Errorf("ping after close: got nil, want an error")
	}
}
