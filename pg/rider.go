package pg

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// A rider is a small write that is not urgent (a daemon renewing its
// name): it goes out in the transaction of the next claim instead of one of
// its own, so that a daemon whose agents tick sends one transaction per
// tick and nothing else. When no claim comes within rideWait, or the claim
// it rode failed, it is sent on its own. When no claim went out within the
// last rideWait either (agents that tick every minute, or none), it is sent
// on its own at once: waiting would wake the daemon twice per write, once
// to queue it and once to send it, for a claim that most likely will not
// come.
type rider struct {
	sql  string
	args []any
	tag  pgconn.CommandTag
	done chan error // buffered: the claim never waits for the rider's caller
}

// rideWait is how long a rider waits for a claim to carry it: longer than
// the usual tick of an agent (a second), well under a daemon name's
// renewal interval.
const rideWait = 2 * time.Second

// ride runs one statement in the next claim's transaction, or in one of its
// own as the type says.
func (p *Provider) ride(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if time.Since(time.Unix(0, p.lastClaim.Load())) > rideWait {
		return p.alone(ctx, sql, args...)
	}
	r := &rider{sql: sql, args: args, done: make(chan error, 1)}
	p.riderMu.Lock()
	p.riders = append(p.riders, r)
	p.riderMu.Unlock()
	t := time.NewTimer(rideWait)
	defer t.Stop()
	var err error
	select {
	case err = <-r.done:
	case <-t.C:
		err = p.unride(ctx, r)
	case <-ctx.Done():
		if err = p.unride(ctx, r); err == nil {
			return r.tag, nil
		}
		return pgconn.CommandTag{}, ctx.Err()
	}
	if err == nil {
		return r.tag, nil
	}
	return p.alone(ctx, sql, args...)
}

// alone runs one statement in a transaction of its own.
func (p *Provider) alone(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(sql, args...).Exec(func(t pgconn.CommandTag) error {
			tag = t
			return nil
		})
	})
	return tag, err
}

// errNotTaken: the rider was taken back before a claim took it.
var errNotTaken = errors.New("no claim carried the statement")

// unride takes r back when no claim has taken it yet (errNotTaken), or
// waits for the claim that did and returns its outcome.
func (p *Provider) unride(ctx context.Context, r *rider) error {
	p.riderMu.Lock()
	for i, w := range p.riders {
		if w == r {
			p.riders = append(p.riders[:i], p.riders[i+1:]...)
			p.riderMu.Unlock()
			return errNotTaken
		}
	}
	p.riderMu.Unlock()
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// takeRiders queues the waiting riders into a claim's batch; the claim
// tells them its outcome with deliver.
func (p *Provider) takeRiders(b *pgx.Batch) []*rider {
	p.riderMu.Lock()
	rs := p.riders
	p.riders = nil
	p.riderMu.Unlock()
	for _, r := range rs {
		b.Queue(r.sql, r.args...).Exec(func(t pgconn.CommandTag) error {
			r.tag = t
			return nil
		})
	}
	return rs
}

// deliver tells the riders of a transaction how it ended.
func deliver(rs []*rider, err error) {
	for _, r := range rs {
		r.done <- err
	}
}
