package config

import (
	"net/url"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// The events a notification can be sent for.
const (
	EventFailed    = "failed"     // a task failed for good: its attempts are used up
	EventTimeout   = "timeout"    // a run was stopped by the agent's timeout
	EventStall     = "stall"      // a run was stopped by the agent's stall_timeout
	EventLeaseLost = "lease_lost" // a run's lease was lost, or could not be renewed in time
)

// NotifyEvents lists every event, the default of notify_on.
var NotifyEvents = []string{EventFailed, EventTimeout, EventStall, EventLeaseLost}

// Notify says whom to tell when something fails. A top-level setting is
// the default of every agent; an agent's own setting replaces it.
type Notify struct {
	OnFailure []string // a program (absolute path) and its arguments
	Webhook   string   // an http:// or https:// URL to post to
	On        []string // the events to tell of; NotifyEvents by default
}

// Enabled reports whether anyone is to be told.
func (n Notify) Enabled() bool { return len(n.OnFailure) > 0 || n.Webhook != "" }

// Wants reports whether event is one to tell of.
func (n Notify) Wants(event string) bool { return n.Enabled() && slices.Contains(n.On, event) }

// notify decodes on_failure, webhook and notify_on from attrs into n, each
// only when present; base resolves a relative program.
func (d *decoder) notify(attrs hcl.Attributes, ctx, base string, n *Notify) {
	if a, ok := attrs["on_failure"]; ok && d.decode(attrs, "on_failure", &n.OnFailure) {
		switch {
		case len(n.OnFailure) == 0 || n.OnFailure[0] == "":
			d.at(line(a), ctx, "on_failure must name a program, as [\"/usr/local/bin/notify\", \"arg\"]")
		case d.hostChecks:
			path, err := resolveProgram(n.OnFailure[0], base)
			if err == nil {
				err = checkExecutable("program", path)
			}
			if err != nil {
				d.at(line(a), ctx, "on_failure: %v", err)
			} else {
				n.OnFailure[0] = path
			}
		}
	}
	if a, ok := attrs["webhook"]; ok && d.str(attrs, "webhook", &n.Webhook) {
		u, err := url.Parse(n.Webhook)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.at(line(a), ctx, "webhook %q is not an http:// or https:// URL", n.Webhook)
		}
	}
	if a, ok := attrs["notify_on"]; ok && d.decode(attrs, "notify_on", &n.On) {
		for _, e := range n.On {
			if !slices.Contains(NotifyEvents, e) {
				d.at(line(a), ctx, "notify_on: %q is not one of %s", e, strings.Join(NotifyEvents, ", "))
			}
		}
	}
}

// inherit fills what n leaves unset from def.
func (n *Notify) inherit(def Notify) {
	if n.OnFailure == nil {
		n.OnFailure = def.OnFailure
	}
	if n.Webhook == "" {
		n.Webhook = def.Webhook
	}
	if n.On == nil {
		n.On = def.On
	}
	if n.On == nil && n.Enabled() {
		n.On = NotifyEvents
	}
}
