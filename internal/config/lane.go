package config

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/lease"
)

// Lane is one lane "NAME" block: settings the daemon applies to the lane at
// start and on every reload. A nil field is left as the database has it
// (set with `qd lane set`, or the default).
type Lane struct {
	Name       string
	MaxRunning *int
	Paused     *bool
	DeclRange  hcl.Range
}

// Pos returns "file:line" of the lane's block.
func (l *Lane) Pos() string { return pos(l.DeclRange) }

// Update is the change the block makes to its lane.
func (l *Lane) Update() lease.LaneUpdate {
	return lease.LaneUpdate{Name: l.Name, MaxRunning: l.MaxRunning, Paused: l.Paused}
}

var laneSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "max_running"}, {Name: "paused"}},
}

// lanes decodes the lane blocks, sorted by name.
func (d *decoder) lanes(blocks hcl.Blocks) []Lane {
	var out []Lane
	bs, dup := d.blocksOf(blocks, "lane")
	for i, b := range bs {
		if l := d.lane(b); !dup[i] {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (d *decoder) lane(b *hcl.Block) Lane {
	l := Lane{Name: b.Labels[0], DeclRange: b.DefRange}
	ctx := fmt.Sprintf("lane %q", l.Name)
	d.block = ctx
	defer func() { d.block = "" }()
	top := b.DefRange.Start.Line
	if !lease.ValidName(l.Name) {
		d.at(top, ctx, "name does not match %s", lease.LanePattern)
	}
	content, diags := b.Body.Content(laneSchema)
	d.diags(diags)
	attrs := content.Attributes
	var n int
	if d.decode(attrs, "max_running", &n) {
		if n < 1 {
			d.at(line(attrs["max_running"]), ctx, "max_running must be at least 1, got %d", n)
		}
		l.MaxRunning = &n
	}
	var paused bool
	if d.decode(attrs, "paused", &paused) {
		l.Paused = &paused
	}
	if l.MaxRunning == nil && l.Paused == nil {
		d.at(top, ctx, "sets nothing: give max_running, paused or both")
	}
	return l
}

// Lane returns the lane block named name, or nil.
func (c *Config) Lane(name string) *Lane {
	for i := range c.Lanes {
		if c.Lanes[i].Name == name {
			return &c.Lanes[i]
		}
	}
	return nil
}
