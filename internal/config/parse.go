package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/gocty"

	"github.com/qd-run/qd/lease"
)

var rootSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{
		{Name: "database"}, {Name: "name"}, {Name: "socket"}, {Name: "state_dir"},
		{Name: "log_level"}, {Name: "log_format"}, {Name: "shutdown_grace"},
		{Name: "retention"}, {Name: "on_failure"}, {Name: "webhook"}, {Name: "notify_on"},
		{Name: "notify_timeout"}, {Name: "notify_backoff"}, {Name: "notify_give_up"},
	},
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "agent", LabelNames: []string{"name"}},
		{Type: "periodic", LabelNames: []string{"name"}},
		{Type: "lane", LabelNames: []string{"name"}},
		{Type: "limit", LabelNames: []string{"name"}},
		{Type: "budget", LabelNames: []string{"name"}},
		{Type: "ui"},
	},
}

// Load reads and parses the config file at path. A missing file gives an
// error wrapping fs.ErrNotExist.
func Load(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(src, path)
}

// LoadClient reads the config file at path for a client command (qd
// status, qd tasks, ...): it checks everything Load checks except what
// concerns this host's files (agent programs and working directories), so
// that a config written for the daemon's host still gives clients its
// database, socket and state directory anywhere.
func LoadClient(path string) (*Config, error) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return parse(src, path, false)
}

// Parse decodes and validates src, the contents of the file filename.
// Relative paths in it are resolved against filename's directory. The
// error, when there is one, is an *Error listing every problem found.
func Parse(src []byte, filename string) (*Config, error) {
	return parse(src, filename, true)
}

func parse(src []byte, filename string, hostChecks bool) (*Config, error) {
	ps := &problems{file: filename}
	if msg := notText(src); msg != "" {
		ps.list = append(ps.list, Problem{File: filename, Message: msg})
		return nil, ps.err()
	}
	file, diags := hclparse.NewParser().ParseHCL(src, filename)
	if diags.HasErrors() {
		ps.diags(diags)
		return nil, ps.err()
	}
	content, diags := file.Body.Content(rootSchema)
	ps.diags(diags)

	dir, err := filepath.Abs(filepath.Dir(filename))
	if err != nil {
		return nil, fmt.Errorf("parse config %s: %w", filename, err)
	}
	d := &decoder{problems: ps, dir: dir, hostChecks: hostChecks}
	c := Default()
	if filename != "" {
		c.Path = filepath.Join(dir, filepath.Base(filename))
	}
	c.file = filename
	d.top(content.Attributes, c)
	d.notify(content.Attributes, "", d.dir, &c.Notify)
	c.RateLimits = d.rateLimits(content.Blocks)
	d.declared = c.RateLimits
	c.Budgets = d.budgets(content.Blocks)
	d.declaredBudgets = c.Budgets
	c.Agents = d.agents(content.Blocks)
	for i := range c.Agents {
		c.Agents[i].Notify.inherit(c.Notify)
	}
	c.Periodics = d.periodics(content.Blocks, c)
	d.timetables(c)
	d.boxes(c)
	c.Lanes = d.lanes(content.Blocks)
	c.UI = d.ui(content.Blocks)
	if err := ps.err(); err != nil {
		return nil, err
	}
	c.Warnings = append(d.warns, warnings(c)...)
	return c, nil
}

// decoder turns attributes into Go values, recording what is wrong.
type decoder struct {
	*problems
	dir string // absolute directory of the file
	// hostChecks checks agent programs and directories on this host.
	hostChecks bool
	warns      []Problem   // found while decoding, for Config.Warnings
	block      string      // the block being decoded, as `agent "build"`; "" at the top
	declared   []RateLimit // the limit blocks, for the agents that name them
	// declaredBudgets are the budget blocks, for the agents that name them.
	declaredBudgets []Budget
	inner           hcl.Blocks // the blocks inside it
}

// top decodes the top-level attributes over the defaults in c.
func (d *decoder) top(attrs hcl.Attributes, c *Config) {
	d.str(attrs, "database", &c.Database)
	d.str(attrs, "name", &c.Name)
	if a, ok := attrs["name"]; ok && !validSupervisorName(c.Name) {
		d.at(line(a), "", "name %q must be non-empty, printable and at most 200 bytes", c.Name)
	}
	d.path(attrs, "socket", "", &c.Socket)
	c.socketLine = lineOr(attrs, "socket", 0)
	d.path(attrs, "state_dir", "", &c.StateDir)
	d.oneOf(attrs, "log_level", "", &c.LogLevel, "trace", "debug", "info", "warn", "error")
	d.oneOf(attrs, "log_format", "", &c.LogFormat, "text", "json")
	d.dur(attrs, "shutdown_grace", "", &c.ShutdownGrace)
	d.dur(attrs, "retention", "", &c.Retention) // absent: keep forever
	d.dur(attrs, "notify_timeout", "", &c.NotifyRetry.Timeout)
	d.dur(attrs, "notify_backoff", "", &c.NotifyRetry.Backoff)
	d.dur(attrs, "notify_give_up", "", &c.NotifyRetry.GiveUp)
}

// path decodes a path into dst, resolved against the file's directory;
// ~ and ~/ stand for the home directory of the user reading the file.
// It returns whether dst was set.
func (d *decoder) path(attrs hcl.Attributes, name, ctx string, dst *string) bool {
	var p string
	if !d.str(attrs, name, &p) {
		return false
	}
	return d.expand(line(attrs[name]), name, ctx, p, dst)
}

// expand resolves p, read from setting name at line ln, as path does.
func (d *decoder) expand(ln int, name, ctx, p string, dst *string) bool {
	switch {
	case p == "":
		d.at(ln, ctx, "%s is empty: leave it out for the default", name)
		return false
	case p == "~" || strings.HasPrefix(p, "~/"):
		home, err := os.UserHomeDir()
		if err != nil {
			d.at(ln, ctx, "%s %q: ~ stands for the home directory, and there is none to take (%v); write the full path", name, p, err)
			return false
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	case strings.HasPrefix(p, "~"):
		d.at(ln, ctx, "%s %q: only ~ and ~/ (this user's home) are expanded, not another user's; write the full path", name, p)
		return false
	case !filepath.IsAbs(p):
		p = filepath.Join(d.dir, p)
	}
	*dst = filepath.Clean(p)
	return true
}

// str decodes a string attribute into dst; false when it is absent or bad.
func (d *decoder) str(attrs hcl.Attributes, name string, dst *string) bool {
	a, ok := attrs[name]
	if !ok {
		return false
	}
	var s string
	if !d.decodeExpr(a, &s) {
		return false
	}
	*dst = s
	return true
}

// decode decodes any other attribute into dst; false when absent or bad.
func (d *decoder) decode(attrs hcl.Attributes, name string, dst any) bool {
	a, ok := attrs[name]
	if !ok {
		return false
	}
	return d.decodeExpr(a, dst)
}

// decodeExpr evaluates a constant expression into dst (a pointer to a
// string, int, []string or map[string]string).
func (d *decoder) decodeExpr(a *hcl.Attribute, dst any) bool {
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() {
		d.diags(diags)
		return false
	}
	ty, err := gocty.ImpliedType(dst)
	if err != nil {
		panic(fmt.Sprintf("config: cannot decode into %T: %v", dst, err))
	}
	if v.IsNull() {
		err = fmt.Errorf("%s required, but have null", ty.FriendlyName())
	} else if v, err = convert.Convert(v, ty); err == nil {
		err = gocty.FromCtyValue(v, dst)
	}
	if err != nil {
		msg := fmt.Sprintf("%s: %v", a.Name, err)
		if d.block != "" {
			msg = d.block + ": " + msg
		}
		r := a.Expr.Range()
		d.list = append(d.list, Problem{File: d.file, Line: r.Start.Line, Column: r.Start.Column, Message: msg})
		return false
	}
	return true
}

// dur decodes a duration such as "30s", "2d" or 30 (seconds) into dst, as
// ParseDuration reads it, and requires it to be positive. It returns
// whether dst was set.
func (d *decoder) dur(attrs hcl.Attributes, name, ctx string, dst *time.Duration) bool {
	var s string
	if !d.str(attrs, name, &s) {
		return false
	}
	v, err := ParseDuration(s)
	switch {
	case err != nil:
		d.at(line(attrs[name]), ctx, "%s %q is %v", name, s, err)
		return false
	case v <= 0:
		d.at(line(attrs[name]), ctx, "%s must be positive, got %q", name, s)
		return false
	}
	*dst = v
	return true
}

// oneOf decodes a string that must be one of allowed (case-insensitive).
func (d *decoder) oneOf(attrs hcl.Attributes, name, ctx string, dst *string, allowed ...string) {
	var s string
	if !d.str(attrs, name, &s) {
		return
	}
	for _, v := range allowed {
		if strings.EqualFold(s, v) {
			*dst = v
			return
		}
	}
	d.at(line(attrs[name]), ctx, "%s %q is not one of %s", name, s, strings.Join(allowed, ", "))
}

// decodeBlocks decodes the blocks of typ, in file order, and returns them
// sorted by name; a block repeating an earlier one's name is decoded, so
// that it is checked, then dropped.
func decodeBlocks[T any](d *decoder, blocks hcl.Blocks, typ string, decode func(*hcl.Block) T, name func(T) string) []T {
	var out []T
	bs, dup := d.blocksOf(blocks, typ)
	for i, b := range bs {
		if v := decode(b); !dup[i] {
			out = append(out, v)
		}
	}
	sort.Slice(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out
}

// enter starts decoding a block of schema named by its label: later
// messages name the block, as its returned context (`agent "build"`) does.
// It checks the name and returns the block's attributes, the context and
// the block's first line. Call leave when the block is done.
func (d *decoder) enter(b *hcl.Block, schema *hcl.BodySchema) (attrs hcl.Attributes, ctx string, top int) {
	ctx = fmt.Sprintf("%s %q", b.Type, b.Labels[0])
	d.block = ctx
	top = b.DefRange.Start.Line
	if !lease.ValidName(b.Labels[0]) {
		d.at(top, ctx, "name does not match %s", lease.LanePattern)
	}
	content, diags := b.Body.Content(schema)
	d.diags(diags)
	d.inner = content.Blocks
	return content.Attributes, ctx, top
}

// leave ends the block enter started.
func (d *decoder) leave() { d.block, d.inner = "", nil }

// blocksOf returns the blocks of typ in file order, with whether each
// repeats the name of an earlier one. A repeat is reported with both lines.
func (d *decoder) blocksOf(blocks hcl.Blocks, typ string) (hcl.Blocks, []bool) {
	first := map[string]*hcl.Block{}
	var out hcl.Blocks
	var dup []bool
	for _, b := range blocks {
		if b.Type != typ {
			continue
		}
		name := b.Labels[0]
		prev, seen := first[name]
		if seen {
			d.at(b.DefRange.Start.Line, "", "%s %q is defined twice, at lines %d and %d", typ, name, prev.DefRange.Start.Line, b.DefRange.Start.Line)
		} else {
			first[name] = b
		}
		out = append(out, b)
		dup = append(dup, seen)
	}
	return out, dup
}

func line(a *hcl.Attribute) int { return a.Range.Start.Line }

// lineOr returns the line of attribute name, or def when it is absent.
func lineOr(attrs hcl.Attributes, name string, def int) int {
	if a, ok := attrs[name]; ok {
		return line(a)
	}
	return def
}

// notText says why src cannot be an HCL file, before the parser reports
// every byte of a binary file.
func notText(src []byte) string {
	if i := bytes.IndexByte(src, 0); i >= 0 {
		return fmt.Sprintf("not a text file: NUL byte at offset %d", i)
	}
	if !utf8.Valid(src) {
		return "not a text file: the contents are not valid UTF-8"
	}
	return ""
}

func validSupervisorName(s string) bool {
	if s == "" || len(s) > 200 {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// SocketOf reads the socket a config file names even when the file is
// invalid, so that `qd status` can still reach the daemon (and show the
// reload error it reports): the socket attribute when it is a plain
// string, else the default socket.
func SocketOf(path string) string {
	def := Default().Socket
	src, err := os.ReadFile(path)
	if err != nil {
		return def
	}
	file, diags := hclparse.NewParser().ParseHCL(src, path)
	if diags.HasErrors() || file == nil {
		return def
	}
	content, _, _ := file.Body.PartialContent(&hcl.BodySchema{Attributes: []hcl.AttributeSchema{{Name: "socket"}}})
	a, ok := content.Attributes["socket"]
	if !ok {
		return def
	}
	v, diags := a.Expr.Value(nil)
	if diags.HasErrors() || v.Type() != cty.String || v.IsNull() {
		return def
	}
	sock := v.AsString()
	if !filepath.IsAbs(sock) {
		sock = filepath.Join(filepath.Dir(path), sock)
	}
	return sock
}
