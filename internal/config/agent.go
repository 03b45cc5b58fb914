package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/robfig/cron/v3"
	"github.com/zclconf/go-cty/cty"

	"github.com/qd-run/qd/lease"
)

var agentSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "command"}, {Name: "dir"}, {Name: "env"}, {Name: "schedule"},
		{Name: "lanes"}, {Name: "parallel"}, {Name: "lease"}, {Name: "heartbeat"},
		{Name: "timeout"}, {Name: "stall_timeout"}, {Name: "kill_grace"},
		{Name: "retry_backoff"}, {Name: "max_attempts"},
		{Name: "on_failure"}, {Name: "webhook"}, {Name: "notify_on"},
		{Name: "memory_max"}, {Name: "cpu_max"}, {Name: "timetable"},
		{Name: "user"}, {Name: "group"}, {Name: "workdir"}, {Name: "keep_workdir"},
		{Name: "output"}, {Name: "limits"}, {Name: "max_deferrals"}, {Name: "budget"},
	},
	Blocks: []hcl.BlockHeaderSchema{{Type: "sandbox"}},
}

// agents decodes the agent blocks, sorted by name.
func (d *decoder) agents(blocks hcl.Blocks) []Agent {
	return decodeBlocks(d, blocks, "agent", d.agent, func(a Agent) string { return a.Name })
}

func (d *decoder) agent(b *hcl.Block) Agent {
	a := Agent{
		Name:         b.Labels[0],
		Parallel:     DefaultParallel,
		Lease:        DefaultLease,
		KillGrace:    DefaultKillGrace,
		RetryBackoff: DefaultRetryBackoff,
		MaxAttempts:  DefaultMaxAttempts,
		Output:       OutputSeparate,
		MaxDeferrals: DefaultMaxDeferrals,
		DeclRange:    b.DefRange,
	}
	attrs, ctx, top := d.enter(b, agentSchema)
	defer d.leave()

	if d.path(attrs, "dir", ctx, &a.Dir) {
		a.dirLine = line(attrs["dir"])
		d.checkDir(a.dirLine, ctx, a.Dir)
	}
	d.env(attrs, ctx, &a)
	d.box(attrs, ctx, &a)
	d.command(attrs, ctx, top, &a)
	if _, ok := attrs["timetable"]; ok {
		a.Timetable, a.timetable = d.scheduleOf(attrs, "timetable", ctx)
		a.timetableLine = line(attrs["timetable"])
	}
	if _, ok := attrs["schedule"]; !ok && a.timetable != nil {
		// Woken when its tasks are due: the daemon that enqueues one
		// claims it at once.
		a.Schedule, a.Sched = a.Timetable, a.timetable
	} else {
		a.Schedule, a.Sched = d.schedule(attrs, ctx, top)
	}
	if d.decode(attrs, "lanes", &a.Lanes) {
		for _, l := range a.Lanes {
			if !lease.ValidName(l) {
				d.at(line(attrs["lanes"]), ctx, "lane %q does not match %s", l, lease.LanePattern)
			}
		}
	}
	if d.decode(attrs, "parallel", &a.Parallel) && (a.Parallel < 1 || a.Parallel > MaxParallel) {
		d.at(line(attrs["parallel"]), ctx, "parallel must be between 1 and %d, got %d", MaxParallel, a.Parallel)
	}
	d.maxAttempts(attrs, ctx, &a.MaxAttempts)
	if d.decode(attrs, "max_deferrals", &a.MaxDeferrals) && (a.MaxDeferrals < 1 || a.MaxDeferrals > lease.MaxMaxAttempts) {
		d.at(line(attrs["max_deferrals"]), ctx, "max_deferrals must be between 1 and %d, got %d", lease.MaxMaxAttempts, a.MaxDeferrals)
	}
	d.timing(attrs, ctx, &a)
	d.execSize(attrs, ctx, a)
	d.limits(attrs, ctx, &a)
	d.agentLimits(attrs, ctx, &a, d.declared)
	d.agentBudget(attrs, ctx, &a, d.declaredBudgets)
	base := d.dir
	if a.Dir != "" {
		base = a.Dir
	}
	d.notify(attrs, ctx, base, &a.Notify)
	return a
}

// timing decodes the durations of an agent and checks how they relate.
func (d *decoder) timing(attrs hcl.Attributes, ctx string, a *Agent) {
	leaseOK := d.dur(attrs, "lease", ctx, &a.Lease) || attrs["lease"] == nil
	if leaseOK && a.Lease < MinLease {
		d.at(line(attrs["lease"]), ctx, "lease %s is shorter than %s: a claim could not be answered and renewed in time, and every run would be given back unstarted", a.Lease, MinLease)
		leaseOK = false
	}
	a.Heartbeat = lease.DefaultHeartbeat(a.Lease)
	if d.dur(attrs, "heartbeat", ctx, &a.Heartbeat) {
		switch {
		case a.Heartbeat < MinHeartbeat:
			d.at(line(attrs["heartbeat"]), ctx, "heartbeat %s is more often than every %s", a.Heartbeat, MinHeartbeat)
		case leaseOK && a.Heartbeat >= a.Lease/2:
			d.at(line(attrs["heartbeat"]), ctx, "heartbeat %s must be less than half the lease (%s), so that one late heartbeat does not lose the lease", a.Heartbeat, a.Lease)
		}
	}
	d.dur(attrs, "timeout", ctx, &a.Timeout)
	d.dur(attrs, "stall_timeout", ctx, &a.StallTimeout)
	d.dur(attrs, "kill_grace", ctx, &a.KillGrace)
	d.dur(attrs, "retry_backoff", ctx, &a.RetryBackoff)
	d.oneOf(attrs, "output", ctx, &a.Output, OutputSeparate, OutputMerged)
}

// The values of an agent's output.
const (
	// OutputSeparate gives the child's stdout and stderr a pipe each: qd
	// logs --stderr can tell them apart, but the kernel keeps no order
	// between two pipes, so lines written back to back to the two may be
	// logged the other way round (the default).
	OutputSeparate = "separate"
	// OutputMerged gives both one pipe, as a terminal does: the log keeps
	// the order they were written in, and all of it counts as stdout.
	OutputMerged = "merged"
)

// maxAttempts decodes a max_attempts attribute into dst and checks its
// range.
func (d *decoder) maxAttempts(attrs hcl.Attributes, ctx string, dst *int) {
	if d.decode(attrs, "max_attempts", dst) && (*dst < 1 || *dst > lease.MaxMaxAttempts) {
		d.at(line(attrs["max_attempts"]), ctx, "max_attempts must be between 1 and %d, got %d", lease.MaxMaxAttempts, *dst)
	}
}

// execSize refuses a command or an env that the kernel would refuse to
// start the program with (E2BIG): one string past MaxArgBytes, or more
// than MaxExecBytes in all.
func (d *decoder) execSize(attrs hcl.Attributes, ctx string, a Agent) {
	total := 0
	for _, arg := range a.Command {
		total += len(arg) + 1
		if len(arg) > MaxArgBytes {
			d.at(line(attrs["command"]), ctx, "command argument of %d bytes is longer than the %d bytes the kernel takes in one", len(arg), MaxArgBytes)
		}
	}
	for k, v := range a.Env {
		n := len(k) + 1 + len(v)
		total += n + 1
		if n > MaxArgBytes {
			d.at(line(attrs["env"]), ctx, "env %q is %d bytes (KEY=VALUE), longer than the %d bytes the kernel takes in one variable", k, n, MaxArgBytes)
		}
	}
	if total > MaxExecBytes {
		ln := lineOr(attrs, "env", lineOr(attrs, "command", 0))
		d.at(ln, ctx, "command and env hold %d bytes, more than the %d a program is started with here", total, MaxExecBytes)
	}
}

// schedule decodes and parses a required schedule attribute.
func (d *decoder) schedule(attrs hcl.Attributes, ctx string, top int) (string, cron.Schedule) {
	if _, ok := attrs["schedule"]; !ok {
		d.at(top, ctx, "schedule is required (a cron expression such as \"*/5 * * * *\", or \"@every 30s\")")
		return "", nil
	}
	return d.scheduleOf(attrs, "schedule", ctx)
}

// scheduleOf decodes and parses the schedule attribute name.
func (d *decoder) scheduleOf(attrs hcl.Attributes, name, ctx string) (string, cron.Schedule) {
	var spec string
	if !d.str(attrs, name, &spec) {
		return "", nil
	}
	sched, err := ParseSchedule(spec)
	switch {
	case err != nil && name == "schedule":
		d.at(line(attrs[name]), ctx, "%v", err)
	case err != nil:
		d.at(line(attrs[name]), ctx, "%s: %v", name, err)
	}
	return spec, sched
}

// timetables turns each agent's timetable into the periodic schedule it
// stands for: one task for the agent at each tick, in its first lane, as
// a periodic block of the agent's name with the defaults would enqueue. A
// periodic block of the same name is refused.
func (d *decoder) timetables(c *Config) {
	for _, a := range c.Agents {
		if a.timetable == nil {
			continue
		}
		if p := c.Periodic(a.Name); p != nil {
			d.at(a.timetableLine, fmt.Sprintf("agent %q", a.Name), "timetable stands for a periodic schedule named %q, and %s defines one already; remove one of them", a.Name, p.Pos())
			continue
		}
		lane := lease.DefaultLane
		if len(a.Lanes) > 0 {
			lane = a.Lanes[0]
		}
		c.Periodics = append(c.Periodics, Periodic{Name: a.Name, Schedule: a.Timetable, Sched: a.timetable,
			Agent: a.Name, Lane: lane, Payload: "{}", CatchUp: DefaultCatchUp, Overlap: DefaultOverlap,
			MaxAttempts: a.MaxAttempts, DeclRange: a.DeclRange})
	}
	sort.Slice(c.Periodics, func(i, j int) bool { return c.Periodics[i].Name < c.Periodics[j].Name })
}

func (d *decoder) checkDir(ln int, ctx, dir string) {
	if !d.hostChecks {
		return
	}
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.at(ln, ctx, "dir %s does not exist", dir)
	case err != nil:
		d.at(ln, ctx, "dir %s: %v", dir, err)
	case !fi.IsDir():
		d.at(ln, ctx, "dir %s is not a directory", dir)
	}
}

// command decodes and checks the program of an agent, and replaces it by
// its absolute path.
func (d *decoder) command(attrs hcl.Attributes, ctx string, top int, a *Agent) {
	attr, ok := attrs["command"]
	if !ok {
		d.at(top, ctx, "command is required: a list of the program and its arguments, such as [\"/usr/local/bin/build\", \"--fast\"]")
		return
	}
	if !d.decode(attrs, "command", &a.Command) {
		return
	}
	ln := line(attr)
	if len(a.Command) == 0 || a.Command[0] == "" {
		d.at(ln, ctx, "command must name a program")
		return
	}
	for _, arg := range a.Command {
		if strings.ContainsRune(arg, 0) {
			d.at(ln, ctx, "command argument %q contains a NUL byte", arg)
			return
		}
	}
	if !d.hostChecks {
		return
	}
	base := d.dir
	if a.Dir != "" {
		base = a.Dir
	}
	path, err := resolveProgram(a.Command[0], base)
	if err == nil {
		err = checkExecutable("program", path)
	}
	if err == nil {
		err = checkShebang(path)
	}
	if err != nil {
		d.at(ln, ctx, "command: %v", err)
		return
	}
	a.Command[0] = path
}

var envKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// env decodes an agent's environment and rejects keys that would change
// how the child is loaded, talk to systemd, or fake qd's own variables.
func (d *decoder) env(attrs hcl.Attributes, ctx string, a *Agent) {
	if !d.decode(attrs, "env", &a.Env) {
		return
	}
	lines := d.keyLines(attrs["env"], ctx)
	keys := make([]string, 0, len(a.Env))
	for k := range a.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		ln, ok := lines[k]
		if !ok {
			ln = line(attrs["env"])
		}
		if msg := envKeyProblem(k); msg != "" {
			d.at(ln, ctx, "env %q: %s", k, msg)
		}
		if strings.ContainsRune(a.Env[k], 0) {
			d.at(ln, ctx, "env %q: the value contains a NUL byte", k)
		}
	}
}

// keyLines returns the line of each key of an object written in place,
// such as env = { A = "1" }, and reports a key written twice, which HCL
// would otherwise resolve silently to the last value.
func (d *decoder) keyLines(attr *hcl.Attribute, ctx string) map[string]int {
	lines := map[string]int{}
	obj, ok := attr.Expr.(*hclsyntax.ObjectConsExpr)
	if !ok {
		return lines
	}
	for _, item := range obj.Items {
		k, diags := item.KeyExpr.Value(nil)
		if diags.HasErrors() || !k.IsKnown() || k.IsNull() || !k.Type().Equals(cty.String) {
			continue
		}
		key, ln := k.AsString(), item.KeyExpr.Range().Start.Line
		if prev, ok := lines[key]; ok {
			where := ""
			if prev != ln {
				where = fmt.Sprintf(", at lines %d and %d", prev, ln)
			}
			d.at(ln, ctx, "%s key %q is set twice%s", attr.Name, key, where)
			continue
		}
		lines[key] = ln
	}
	return lines
}

func envKeyProblem(k string) string {
	switch {
	case !envKeyPattern.MatchString(k):
		return "not a valid variable name (letters, digits and _, not starting with a digit)"
	case k == "LD_PRELOAD", k == "LD_LIBRARY_PATH", strings.HasPrefix(k, "DYLD_"):
		return "may not be set: it changes how the dynamic loader loads the agent"
	case k == "NOTIFY_SOCKET":
		return "may not be set: it belongs to systemd and qd"
	case strings.HasPrefix(k, "QD_"):
		return "may not be set: QD_ variables are set by qd for each run"
	}
	return ""
}
