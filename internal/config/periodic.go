package config

import (
	"encoding/json"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/lease"
)

var periodicSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "schedule"}, {Name: "agent"}, {Name: "lane"}, {Name: "payload"},
		{Name: "priority"}, {Name: "catch_up"}, {Name: "overlap"}, {Name: "max_attempts"},
	},
}

// periodics decodes the periodic blocks, sorted by name. c holds the agents
// already decoded.
func (d *decoder) periodics(blocks hcl.Blocks, c *Config) []Periodic {
	decode := func(b *hcl.Block) Periodic { return d.periodic(b, c) }
	return decodeBlocks(d, blocks, "periodic", decode, func(p Periodic) string { return p.Name })
}

func (d *decoder) periodic(b *hcl.Block, c *Config) Periodic {
	p := Periodic{
		Name:      b.Labels[0],
		Lane:      lease.DefaultLane,
		Payload:   "{}",
		CatchUp:   DefaultCatchUp,
		Overlap:   DefaultOverlap,
		DeclRange: b.DefRange,
	}
	attrs, ctx, top := d.enter(b, periodicSchema)
	defer d.leave()

	p.Schedule, p.Sched = d.schedule(attrs, ctx, top)
	agent := d.periodicAgent(attrs, ctx, top, c, &p)
	if _, ok := attrs["lane"]; !ok || d.str(attrs, "lane", &p.Lane) {
		d.checkLane(lineOr(attrs, "lane", top), ctx, p.Lane, agent)
	}
	if d.str(attrs, "payload", &p.Payload) {
		d.checkPayload(line(attrs["payload"]), ctx, p.Payload)
	}
	if d.decode(attrs, "priority", &p.Priority) && (p.Priority < lease.MinPriority || p.Priority > lease.MaxPriority) {
		d.at(line(attrs["priority"]), ctx, "priority must be between %d and %d, got %d", lease.MinPriority, lease.MaxPriority, p.Priority)
	}
	d.oneOf(attrs, "catch_up", ctx, &p.CatchUp, CatchUpSkip, CatchUpOnce)
	d.oneOf(attrs, "overlap", ctx, &p.Overlap, OverlapSkip, OverlapQueue)
	p.MaxAttempts = DefaultMaxAttempts
	if agent != nil {
		p.MaxAttempts = agent.MaxAttempts
	}
	d.maxAttempts(attrs, ctx, &p.MaxAttempts)
	return p
}

// periodicAgent decodes the required agent attribute and returns the agent
// it names, or nil.
func (d *decoder) periodicAgent(attrs hcl.Attributes, ctx string, top int, c *Config, p *Periodic) *Agent {
	if _, ok := attrs["agent"]; !ok {
		d.at(top, ctx, "agent is required: the name of an agent block that runs the tasks")
		return nil
	}
	if !d.str(attrs, "agent", &p.Agent) {
		return nil
	}
	a := c.Agent(p.Agent)
	if a == nil && !lease.ValidName(p.Agent) {
		d.at(line(attrs["agent"]), ctx, "agent %q does not match %s", p.Agent, lease.LanePattern)
	}
	return a // nil for a valid name is a warning: see warnings
}

// checkLane requires a valid lane that the agent serves, when it names its
// lanes.
func (d *decoder) checkLane(ln int, ctx, lane string, a *Agent) {
	if !lease.ValidName(lane) {
		d.at(ln, ctx, "lane %q does not match %s", lane, lease.LanePattern)
		return
	}
	if a == nil || len(a.Lanes) == 0 {
		return
	}
	for _, l := range a.Lanes {
		if l == lane {
			return
		}
	}
	d.at(ln, ctx, "lane %q is not among the lanes of agent %q (%v), so its tasks would never run", lane, a.Name, a.Lanes)
}

// checkPayload refuses a payload that no enqueue would take, so that the
// schedule does not fail at every tick.
func (d *decoder) checkPayload(ln int, ctx, payload string) {
	var v any
	if err := json.Unmarshal([]byte(payload), &v); err != nil && len(payload) <= lease.MaxPayloadBytes {
		d.at(ln, ctx, "payload is not valid JSON: %v", err)
		return
	}
	if err := lease.CheckPayload([]byte(payload)); err != nil {
		d.at(ln, ctx, "%s", strings.TrimPrefix(err.Error(), lease.ErrInvalid.Error()+": "))
	}
}
