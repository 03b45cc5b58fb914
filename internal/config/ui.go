package config

import (
	"net"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// DefaultUIListen is the address of a ui block that names none.
const DefaultUIListen = "127.0.0.1:7780"

// UI is the ui block: the daemon serves the dashboard (package ui) too.
type UI struct {
	Listen       string   // host:port; DefaultUIListen when left out
	ReadOnly     bool     // hide and refuse the actions
	Token        string   // required of every request; needed beyond loopback
	AllowedHosts []string // names the Host header may carry besides the address
	DeclRange    hcl.Range
}

// Pos returns "file:line" of the ui block.
func (u *UI) Pos() string { return pos(u.DeclRange) }

var uiSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "listen"}, {Name: "read_only"}, {Name: "token"}, {Name: "allowed_hosts"}},
}

// ui decodes the one ui block, nil when there is none.
func (d *decoder) ui(blocks hcl.Blocks) *UI {
	var u *UI
	for _, b := range blocks {
		if b.Type != "ui" {
			continue
		}
		if u != nil {
			d.at(b.DefRange.Start.Line, "", "ui is defined twice, at lines %d and %d", u.DeclRange.Start.Line, b.DefRange.Start.Line)
			continue
		}
		u = &UI{Listen: DefaultUIListen, DeclRange: b.DefRange}
		d.block = "ui"
		content, diags := b.Body.Content(uiSchema)
		d.diags(diags)
		attrs := content.Attributes
		d.str(attrs, "listen", &u.Listen)
		d.decode(attrs, "read_only", &u.ReadOnly)
		d.str(attrs, "token", &u.Token)
		d.decode(attrs, "allowed_hosts", &u.AllowedHosts)
		top := b.DefRange.Start.Line
		host, port, err := net.SplitHostPort(u.Listen)
		switch {
		case err != nil || port == "":
			d.at(lineOr(attrs, "listen", top), "ui", "listen %q is not host:port, as %q", u.Listen, DefaultUIListen)
		case u.Token == "" && !loopbackHost(host):
			d.at(lineOr(attrs, "listen", top), "ui", "listen %q is not a loopback address: set token too, "+
				"or the dashboard would be open to anyone who reaches it", u.Listen)
		}
		d.block = ""
	}
	return u
}

func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
