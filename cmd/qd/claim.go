package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

var claimCommand = &command{
	name:    "claim",
	summary: "claim one task and print its lease as JSON",
	usage:   "[--lane L]... [--agent A] [--limit NAME]... [--lease DURATION] [--owner NAME] [--wait SECONDS]",
	help: `Prints one JSON object on one line: task_id, run_id, lane, agent, attempt,
max_attempts, priority, payload (the JSON as enqueued), lease_expires_at
(RFC 3339) and owner. When nothing can be claimed it prints nothing and exits 3;
with --wait it polls, with jitter, until the deadline first. --lane may repeat;
no --lane means any lane. --limit takes one unit of that rate limit with the
claim, in its transaction (docs/limits.md); a claim the limit holds back exits
3 and says when its next unit is due, and --wait sleeps until then.`,
	db:    true,
	setup: setupClaim,
}

func setupClaim(fs *flag.FlagSet) runFunc {
	var lanes stringList
	fs.Var(&lanes, "lane", "claim only from lane `NAME` (repeatable; default any lane)")
	agent := fs.String("agent", "", "claim only tasks for agent `NAME` (default any agent)")
	var limits stringList
	fs.Var(&limits, "limit", "take one unit of rate limit `NAME` (repeatable)")
	leaseFor := durationFlag(fs, "lease", lease.DefaultLease, "hold the lease for `DURATION`")
	owner := fs.String("owner", "", "record `NAME` as the run's owner (default cli:HOST:PID)")
	var wait time.Duration
	fs.Var(durationValue{d: &wait, allowZero: true}, "wait", "poll for up to `SECONDS` when nothing is claimable")
	return func(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		p := lease.ClaimParams{Lanes: lanes, Agent: *agent, Owner: *owner, Lease: *leaseFor, Limits: limits}
		if p.Owner == "" {
			p.Owner = defaultOwner()
		}
		if err := lease.ValidateClaim(&p); err != nil {
			return usageErrorf("claim: %v", err)
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		l, err := claimWait(ctx, prov, p, wait)
		if err != nil {
			return err
		}
		out, err := json.Marshal(api.LeaseOf(*l))
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(env.Stdout, "%s\n", out)
		return err
	}
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return fmt.Sprintf("cli:%s:%d", host, os.Getpid())
}

// claimWait claims once, then keeps polling until wait has passed. Between
// attempts it sleeps a random 0.5–1.5s, so that many waiting clients spread
// out.
func claimWait(ctx context.Context, prov lease.Provider, p lease.ClaimParams, wait time.Duration) (*lease.Lease, error) {
	deadline := time.Now().Add(wait)
	for {
		l, err := prov.Claim(ctx, p)
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, lease.ErrNoWork) {
			return nil, err
		}
		left := time.Until(deadline)
		var held *lease.HeldError
		if left <= 0 && errors.As(err, &held) {
			return nil, &ExitError{Code: ExitNoWork, Err: err}
		}
		if left <= 0 {
			return nil, &ExitError{Code: ExitNoWork, Err: errors.New("nothing to claim")}
		}
		pause := min(left, 500*time.Millisecond+rand.N(time.Second))
		if held != nil {
			// Until the limit's next unit, a little later at random.
			pause = min(left, held.In+rand.N(max(held.In/4, 10*time.Millisecond)))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}
