package config

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/lease"
)

// Budget is one budget "NAME" block: what the runs of the agents that name
// it may spend in each calendar period (docs/limits.md). The daemon
// writes it to the queue at start and on every reload.
type Budget struct {
	Name      string
	Max       float64
	Period    string // one of lease.BudgetPeriods
	Timezone  string // "UTC" by default
	DeclRange hcl.Range
}

// Pos returns "file:line" of the budget's block.
func (b *Budget) Pos() string { return pos(b.DeclRange) }

// Update is the change the block makes to its budget, recording agents as
// the ones that use it.
func (b *Budget) Update(setBy string, agents []string) lease.BudgetUpdate {
	max := b.Max
	return lease.BudgetUpdate{Name: b.Name, Max: &max, Period: b.Period, Timezone: b.Timezone, SetBy: setBy,
		Agents: agents}
}

var budgetSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "max", Required: true}, {Name: "period", Required: true}, {Name: "timezone"}},
}

// budgets decodes the budget blocks, sorted by name.
func (d *decoder) budgets(blocks hcl.Blocks) []Budget {
	var out []Budget
	bs, dup := d.blocksOf(blocks, "budget")
	for i, b := range bs {
		if bg := d.budget(b); !dup[i] {
			out = append(out, bg)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (d *decoder) budget(b *hcl.Block) Budget {
	bg := Budget{Name: b.Labels[0], Timezone: "UTC", DeclRange: b.DefRange}
	ctx := fmt.Sprintf("budget %q", bg.Name)
	d.block = ctx
	defer func() { d.block = "" }()
	if !lease.ValidName(bg.Name) {
		d.at(b.DefRange.Start.Line, ctx, "name does not match %s", lease.LanePattern)
	}
	content, diags := b.Body.Content(budgetSchema)
	d.diags(diags)
	attrs := content.Attributes
	if d.decode(attrs, "max", &bg.Max) && (bg.Max < 0 || bg.Max > lease.MaxUsage) {
		d.at(line(attrs["max"]), ctx, "max is what the agents may spend in a period, from 0 to %g, got %g", float64(lease.MaxUsage), bg.Max)
	}
	if d.str(attrs, "period", &bg.Period) && !slices.Contains(lease.BudgetPeriods, bg.Period) {
		d.at(line(attrs["period"]), ctx, "period %q is not one of %s", bg.Period, strings.Join(lease.BudgetPeriods, ", "))
	}
	if d.str(attrs, "timezone", &bg.Timezone) {
		if err := lease.ValidateBudget(lease.BudgetUpdate{Name: "x", Timezone: bg.Timezone}); err != nil {
			d.at(line(attrs["timezone"]), ctx, "timezone %q is not a time zone this host knows (such as \"Europe/Paris\")", bg.Timezone)
		}
	}
	return bg
}

// agentBudget decodes an agent's budget and refuses one no budget block of
// the file declares.
func (d *decoder) agentBudget(attrs hcl.Attributes, ctx string, a *Agent, declared []Budget) {
	if !d.str(attrs, "budget", &a.Budget) {
		return
	}
	if !slices.ContainsFunc(declared, func(b Budget) bool { return b.Name == a.Budget }) {
		d.at(line(attrs["budget"]), ctx, "budget %q is not declared: add a budget %q { max = 5.00  period = \"1d\" } block",
			a.Budget, a.Budget)
	}
}

// BudgetAgents returns the agents of c whose budget is name.
func (c *Config) BudgetAgents(name string) []string {
	var out []string
	for _, a := range c.Agents {
		if a.Budget == name {
			out = append(out, a.Name)
		}
	}
	return out
}
