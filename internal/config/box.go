package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
)

// The one value of an agent's workdir, and those of keep_workdir.
const (
	WorkdirFresh = "fresh"  // a new empty directory for each run, under state_dir/work
	KeepNever    = "never"  // removed when the run ends (the default)
	KeepFailed   = "failed" // kept when the run did not complete
	KeepAlways   = "always" // kept whatever the run's end
)

// The networks of a sandbox block (Sandbox.Network).
const (
	NetworkHost  = "host"  // the host's, as without a sandbox (the default)
	NetworkNone  = "none"  // none: a loopback of its own only
	NetworkPorts = "ports" // the host's, TCP connections to Sandbox.Ports only
)

// User is who an agent's runs run as: its user and group, as this host
// knows them.
type User struct {
	Name  string
	Group string // as written; "" for the user's own
	UID   int
	GID   int
	// Groups are the user's supplementary groups.
	Groups []int
	Home   string
	// Known says the host was asked (Load); LoadClient leaves the ids 0.
	Known bool
}

// Sandbox is an agent's sandbox block: what its runs may read, write
// and reach (docs/sandbox.md).
type Sandbox struct {
	Read, Write []string // absolute paths
	Network     string   // NetworkHost, NetworkNone or NetworkPorts
	Ports       []uint16 // with NetworkPorts
	DeclRange   hcl.Range

	readLine, writeLine, networkLine int
}

// Pos returns "file:line" of the sandbox block.
func (s *Sandbox) Pos() string { return pos(s.DeclRange) }

var sandboxSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "read"}, {Name: "write"}, {Name: "network"}},
}

// box decodes who an agent's runs run as, where they work and their
// sandbox block. What this host can give them is for CheckHost.
func (d *decoder) box(attrs hcl.Attributes, ctx string, a *Agent) {
	d.user(attrs, ctx, a)
	d.workdir(attrs, ctx, a)
	for _, b := range d.inner {
		if b.Type != "sandbox" {
			continue
		}
		if a.Sandbox != nil {
			d.at(b.DefRange.Start.Line, ctx, "sandbox is defined twice, at lines %d and %d", a.Sandbox.DeclRange.Start.Line, b.DefRange.Start.Line)
			continue
		}
		a.Sandbox = d.sandbox(b, ctx)
	}
}

// user decodes user and group, and looks them up on this host.
func (d *decoder) user(attrs hcl.Attributes, ctx string, a *Agent) {
	u := &User{}
	if !d.str(attrs, "user", &u.Name) {
		if g, ok := attrs["group"]; ok {
			d.at(line(g), ctx, "group needs user: name the user the agent runs as, and group for a group other than that user's own")
		}
		return
	}
	a.userLine = line(attrs["user"])
	d.str(attrs, "group", &u.Group)
	if u.Name == "" {
		d.at(a.userLine, ctx, "user is empty: leave it out to run the agent as the daemon's user")
		return
	}
	a.User = u
	if !d.hostChecks {
		return
	}
	pw, err := user.Lookup(u.Name)
	if err != nil {
		d.at(a.userLine, ctx, "user %q is not a user of this host (%v): create it (useradd --system %s) or name another", u.Name, err, u.Name)
		return
	}
	u.UID, _ = strconv.Atoi(pw.Uid)
	u.GID, _ = strconv.Atoi(pw.Gid)
	u.Home = pw.HomeDir
	ids, _ := pw.GroupIds()
	for _, id := range ids {
		if g, err := strconv.Atoi(id); err == nil {
			u.Groups = append(u.Groups, g)
		}
	}
	if u.Group != "" {
		g, err := user.LookupGroup(u.Group)
		if err != nil {
			d.at(lineOr(attrs, "group", a.userLine), ctx, "group %q is not a group of this host (%v): create it (groupadd --system %s) or name another", u.Group, err, u.Group)
			return
		}
		u.GID, _ = strconv.Atoi(g.Gid)
	}
	u.Known = true
}

// workdir decodes workdir and keep_workdir.
func (d *decoder) workdir(attrs hcl.Attributes, ctx string, a *Agent) {
	if d.str(attrs, "workdir", &a.Workdir) {
		ln := line(attrs["workdir"])
		switch {
		case a.Workdir != WorkdirFresh:
			d.at(ln, ctx, "workdir %q: its one value is %q, a new empty directory for each run under state_dir/work; for a directory of your own, set dir", a.Workdir, WorkdirFresh)
			a.Workdir = ""
		case a.Dir != "":
			d.at(ln, ctx, "workdir and dir both set the runs' working directory: keep one")
		}
	}
	if k, ok := attrs["keep_workdir"]; ok {
		d.oneOf(attrs, "keep_workdir", ctx, &a.KeepWorkdir, KeepNever, KeepFailed, KeepAlways)
		if a.Workdir == "" {
			d.at(line(k), ctx, "keep_workdir needs workdir = %q: only a directory qd made for the run is removed or kept", WorkdirFresh)
		}
	}
	if a.Workdir != "" && a.KeepWorkdir == "" {
		a.KeepWorkdir = KeepNever
	}
}

// sandbox decodes one sandbox block.
func (d *decoder) sandbox(b *hcl.Block, actx string) *Sandbox {
	s := &Sandbox{Network: NetworkHost, DeclRange: b.DefRange}
	ctx := actx + " sandbox"
	content, diags := b.Body.Content(sandboxSchema)
	d.diags(diags)
	attrs := content.Attributes
	s.Read, s.readLine = d.paths(attrs, "read", ctx), lineOr(attrs, "read", 0)
	s.Write, s.writeLine = d.paths(attrs, "write", ctx), lineOr(attrs, "write", 0)
	if n, ok := attrs["network"]; ok {
		s.networkLine = line(n)
		d.network(n, ctx, s)
	}
	return s
}

// paths decodes a list of paths that must exist (on this host, for Load).
func (d *decoder) paths(attrs hcl.Attributes, name, ctx string) []string {
	var raw, out []string
	if !d.decode(attrs, name, &raw) {
		return nil
	}
	ln := line(attrs[name])
	for _, p := range raw {
		var abs string
		if !d.expand(ln, name+" path", ctx, p, &abs) {
			continue
		}
		if abs == "/" {
			d.at(ln, ctx, "%s path / is the whole file system, the daemon's own files too: list the directories the agent needs", name)
			continue
		}
		if d.hostChecks {
			if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
				d.at(ln, ctx, "%s path %s does not exist: a box shows only what exists; create it first, or remove it from %s", name, abs, name)
				continue
			} else if err != nil {
				d.at(ln, ctx, "%s path %s: %v", name, abs, err)
				continue
			}
		}
		out = append(out, abs)
	}
	return out
}

// network decodes network: "host", "none", or a list of TCP ports.
func (d *decoder) network(a *hcl.Attribute, ctx string, s *Sandbox) {
	bad := func(what string) {
		d.at(line(a), ctx, `network%s is neither of its forms: "host" (the default), "none" (no network, a loopback of its own), or a list of the TCP ports runs may connect to, such as ["443", "5432"]`, what)
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		d.diags(diags)
		return
	}
	switch ty := v.Type(); {
	case v.IsNull() || !v.IsWhollyKnown():
		bad(" null")
	case ty == cty.String:
		switch n := v.AsString(); n {
		case NetworkHost, NetworkNone:
			s.Network = n
		default:
			bad(" " + strconv.Quote(n))
		}
	case ty.IsTupleType() || ty.IsListType():
		if v.LengthInt() == 0 {
			d.at(line(a), ctx, `network = [] lists no port: for no network at all, write network = "none"`)
			return
		}
		for it := v.ElementIterator(); it.Next(); {
			_, ev := it.Element()
			sv, err := convert.Convert(ev, cty.String)
			if err != nil || sv.IsNull() {
				bad(" listing a " + ev.Type().FriendlyName())
				return
			}
			p, err := strconv.ParseUint(strings.TrimSpace(sv.AsString()), 10, 16)
			if err != nil || p == 0 {
				d.at(line(a), ctx, "network port %q is not a TCP port: write a number from 1 to 65535", sv.AsString())
				return
			}
			if !slices.Contains(s.Ports, uint16(p)) {
				s.Ports = append(s.Ports, uint16(p))
			}
		}
		s.Network = NetworkPorts
	default:
		bad(" (a " + ty.FriendlyName() + ")")
	}
}

// boxes refuses a sandbox that would show the daemon's state directory,
// which holds every run's output and the private database: no box ever
// shows it.
func (d *decoder) boxes(c *Config) {
	for _, a := range c.Agents {
		s := a.Sandbox
		if s == nil {
			continue
		}
		ctx := fmt.Sprintf("agent %q sandbox", a.Name)
		dir := []string{}
		if a.Dir != "" {
			dir = append(dir, a.Dir) // a boxed run is shown its dir
		}
		for _, list := range []struct {
			name  string
			paths []string
			line  int
		}{{"read", s.Read, s.readLine}, {"write", s.Write, s.writeLine}, {"dir", dir, a.dirLine}} {
			for _, p := range list.paths {
				if within(c.StateDir, p) || within(p, c.StateDir) {
					d.at(list.line, ctx, "%s path %s overlaps the daemon's state directory %s, which a box never shows (it holds every run's output); list directories beside it",
						list.name, p, c.StateDir)
				}
			}
		}
	}
}

// within reports whether path is dir or under it.
func within(dir, path string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
