package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

// giveBackSummary is the summary of a run given back because its claim's
// outcome could not be learned in time.
const giveBackSummary = "given back unstarted: the claim's reply was lost and its outcome stayed unknown past the lease's local deadline"

// giveBackMax caps the wait between rounds of giving back; giveBackNow
// bounds the try a failed claim makes before it returns.
const (
	giveBackMax = 5 * time.Second
	giveBackNow = 2 * time.Second
)

// pend records a claim whose outcome is unknown, so that the runs it may
// have made are given back (abandoned, attempt refunded) once the database
// answers. Their caller never learnt of them, so it never starts them.
func (p *Provider) pend(cp lease.ClaimParams) {
	p.pendMu.Lock()
	defer p.pendMu.Unlock()
	if p.pending == nil {
		p.pending = map[string]lease.ClaimParams{}
	}
	p.pending[cp.Token] = cp
	p.logger.Warn("claim outcome unknown; its runs will be given back", "claim_token", cp.Token)
	if !p.giving {
		p.giving = true
		p.bg.Add(1)
		go p.giveBackLoop()
	}
}

// giveBackLoop gives back pending claims until none is left or Close.
func (p *Provider) giveBackLoop() {
	defer p.bg.Done()
	wait := claimRetryMin
	for sleep(p.closing, wait) {
		p.giveBackAll(p.closing)
		p.pendMu.Lock()
		if len(p.pending) == 0 {
			p.giving = false
			p.pendMu.Unlock()
			return
		}
		p.pendMu.Unlock()
		wait = min(2*wait, giveBackMax)
	}
	p.pendMu.Lock()
	p.giving = false
	p.pendMu.Unlock()
}

// giveBackAll tries each pending claim once.
func (p *Provider) giveBackAll(ctx context.Context) {
	p.pendMu.Lock()
	cps := make([]lease.ClaimParams, 0, len(p.pending))
	for _, cp := range p.pending {
		cps = append(cps, cp)
	}
	p.pendMu.Unlock()
	for _, cp := range cps {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		runs, err := p.giveBack(ctx, cp)
		cancel()
		if err != nil {
			p.logger.Debug("give back claim: database not answering yet", "claim_token", cp.Token, "error", err)
			continue
		}
		p.pendMu.Lock()
		delete(p.pending, cp.Token)
		p.pendMu.Unlock()
		p.logger.Info("gave back the runs of a claim whose outcome was unknown", "claim_token", cp.Token, "runs", runs)
	}
}

// giveBack settles the live runs the claim of cp made as abandoned with
// the attempt refunded, and returns their ids. The claim function with no
// tasks to take only looks the token up, after waiting for a call with
// the same token that may still be in flight.
func (p *Provider) giveBack(ctx context.Context, cp lease.ClaimParams) ([]int64, error) {
	ls, err := p.claimTx(ctx, cp, 0)
	if err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(ls))
	ss := make([]lease.Settlement, 0, len(ls))
	for _, l := range ls {
		ids = append(ids, l.RunID)
		ss = append(ss, lease.GiveBack(l, giveBackSummary))
	}
	if len(ss) == 0 {
		return ids, nil
	}
	// A run refused as lease lost has ended another way: nothing to give.
	if _, err := p.Settle(ctx, ss...); err != nil {
		return nil, fmt.Errorf("settle runs %v: %w", ids, err)
	}
	return ids, nil
}

// pendingTokens returns the tokens of the claims whose runs are still to be
// given back.
func (p *Provider) pendingTokens() []string {
	p.pendMu.Lock()
	defer p.pendMu.Unlock()
	out := make([]string, 0, len(p.pending))
	for t := range p.pending {
		out = append(out, t)
	}
	return out
}
