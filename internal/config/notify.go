package config

import (
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/lease"
)

// The events a notification can be sent for.
const (
	EventFailed    = lease.EventFailed    // a task failed for good: its attempts are used up
	EventTimeout   = lease.EventTimeout   // a run was stopped by the agent's timeout
	EventStall     = lease.EventStall     // a run was stopped by the agent's stall_timeout
	EventLeaseLost = lease.EventLeaseLost // a run's lease was lost, or could not be renewed in time
	// EventBudgetExhausted: the agent's budget reached its max for the
	// period (once per budget and period).
	EventBudgetExhausted = lease.EventBudgetExhausted
)

// NotifyRetry is how hard notifications are tried: the top-level
// notify_timeout, notify_backoff and notify_give_up. Zero fields keep
// package notify's defaults (30 s for a command and 10 s for a webhook,
// 30 s doubling to an hour, 24 h).
type NotifyRetry struct {
	Timeout time.Duration // one try of any target
	Backoff time.Duration // the wait before the first retry
	GiveUp  time.Duration // how long after it was recorded a notification is given up
}

// NotifyEvents lists every event, the default of notify_on.
var NotifyEvents = []string{EventFailed, EventTimeout, EventStall, EventLeaseLost, EventBudgetExhausted}

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
			d.at(line(a), ctx, "webhook %s is not an http:// or https:// URL", lease.RedactWebhook(n.Webhook))
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
