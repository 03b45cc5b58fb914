package config

import (
	"fmt"
	"sort"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/lease"
)

// RateLimit is one limit "NAME" block: a rate limit shared by every daemon
// and claimer of the queue (docs/limits.md). The daemon writes it to the
// queue at start and on every reload, as it does lane blocks.
type RateLimit struct {
	Name      string
	Rate      int
	Per       time.Duration
	Burst     int
	DeclRange hcl.Range
}

// Pos returns "file:line" of the limit's block.
func (l *RateLimit) Pos() string { return pos(l.DeclRange) }

// Update is the change the block makes to its limit, recording agents as
// the ones that use it.
func (l *RateLimit) Update(setBy string, agents []string) lease.LimitUpdate {
	burst := l.Burst
	return lease.LimitUpdate{Name: l.Name, Rate: l.Rate, Per: l.Per, Burst: &burst, SetBy: setBy, Agents: agents}
}

var limitSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "rate", Required: true}, {Name: "burst"}},
}

// rateLimits decodes the limit blocks, sorted by name.
func (d *decoder) rateLimits(blocks hcl.Blocks) []RateLimit {
	var out []RateLimit
	bs, dup := d.blocksOf(blocks, "limit")
	for i, b := range bs {
		if l := d.rateLimit(b); !dup[i] {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (d *decoder) rateLimit(b *hcl.Block) RateLimit {
	l := RateLimit{Name: b.Labels[0], DeclRange: b.DefRange}
	ctx := fmt.Sprintf("limit %q", l.Name)
	d.block = ctx
	defer func() { d.block = "" }()
	if !lease.ValidName(l.Name) {
		d.at(b.DefRange.Start.Line, ctx, "name does not match %s", lease.LanePattern)
	}
	content, diags := b.Body.Content(limitSchema)
	d.diags(diags)
	attrs := content.Attributes
	var rate string
	if d.str(attrs, "rate", &rate) {
		var err error
		if l.Rate, l.Per, err = lease.ParseRate(rate); err != nil {
			d.at(line(attrs["rate"]), ctx, "%s", trimInvalid(err))
		}
	}
	if d.decode(attrs, "burst", &l.Burst) && (l.Burst < 0 || l.Burst > lease.MaxLimitBurst) {
		d.at(line(attrs["burst"]), ctx, "burst is how many units may be taken beyond the steady rate, from 0 to %d, got %d",
			lease.MaxLimitBurst, l.Burst)
	}
	return l
}

// trimInvalid is err's text without the ErrInvalid prefix.
func trimInvalid(err error) string {
	s := err.Error()
	if p := lease.ErrInvalid.Error() + ": "; len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// agentLimits decodes an agent's limits and refuses a name no limit block
// of the file declares.
func (d *decoder) agentLimits(attrs hcl.Attributes, ctx string, a *Agent, declared []RateLimit) {
	if !d.decode(attrs, "limits", &a.Limits) {
		return
	}
	at := line(attrs["limits"])
	for _, name := range a.Limits {
		found := false
		for _, l := range declared {
			found = found || l.Name == name
		}
		if !found {
			d.at(at, ctx, "limit %q is not declared: add a limit %q { rate = \"60/1m\" } block", name, name)
		}
	}
}

// RateLimit returns the limit block named name, or nil.
func (c *Config) RateLimit(name string) *RateLimit {
	for i := range c.RateLimits {
		if c.RateLimits[i].Name == name {
			return &c.RateLimits[i]
		}
	}
	return nil
}

// LimitAgents returns the agents of c that use limit name.
func (c *Config) LimitAgents(name string) []string {
	var out []string
	for _, a := range c.Agents {
		for _, l := range a.Limits {
			if l == name {
				out = append(out, a.Name)
			}
		}
	}
	return out
}
