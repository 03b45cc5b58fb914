package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// Ensure the top-level notifications are every agent's default, an agent's
// own settings replace them one by one, notify_on defaults to every event
// once someone is to be told, and bad settings are refused with their line.
func TestParse_Notify(t *testing.T) {
	src := `
on_failure = ["/bin/true", "top"]
webhook    = "https://hooks.example/qd"

agent "inherits" {
  command  = ["/bin/true"]
  schedule = "@hourly"
}

agent "own" {
  command   = ["/bin/true"]
  schedule  = "@hourly"
  webhook   = "http://127.0.0.1:9/own"
  notify_on = ["timeout"]
}
`
	c, err := Parse([]byte(src), "/etc/qd/qd.hcl")
	if err != nil {
		t.Fatal(err)
	}
	in, own := c.Agent("inherits").Notify, c.Agent("own").Notify
	if !slices.Equal(in.OnFailure, []string{"/bin/true", "top"}) || in.Webhook != "https://hooks.example/qd" || !slices.Equal(in.On, NotifyEvents) {
		t.Errorf("inherited notifications: %+v", in)
	}
	if !slices.Equal(own.OnFailure, []string{"/bin/true", "top"}) || own.Webhook != "http://127.0.0.1:9/own" || !own.Wants(EventTimeout) || own.Wants(EventFailed) {
		t.Errorf("an agent's own notifications: %+v", own)
	}
	if c, err := Parse([]byte("agent \"x\" {\n  command = [\"/bin/true\"]\n  schedule = \"@hourly\"\n}\n"), "q.hcl"); err != nil || c.Agent("x").Notify.Enabled() {
		t.Errorf("no notifications configured: %+v, %v", c.Agent("x").Notify, err)
	}

	bad := `
webhook   = "ftp://user:s3cret@example/x"
notify_on = ["failed", "sometimes"]
on_failure = ["/no/such/notifier"]
notify_give_up = "soon"
`
	_, err = Parse([]byte(bad), "/etc/qd/qd.hcl")
	for _, want := range []string{
		`qd.hcl:2: webhook ftp://example/… [`,
		`] is not an http:// or https:// URL`,
		`qd.hcl:3: notify_on: "sometimes" is not one of failed, timeout, stall, lease_lost`,
		`qd.hcl:4: on_failure: `,
		`qd.hcl:5: notify_give_up "soon" is`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad notifications: error %v, want %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the webhook's password: %v", err)
	}
	retry := "notify_timeout = \"5s\"\nnotify_backoff = \"1m\"\nnotify_give_up = \"2h\"\n"
	if c, err := Parse([]byte(retry), "q.hcl"); err != nil || c.NotifyRetry != (NotifyRetry{5 * time.Second, time.Minute, 2 * time.Hour}) {
		t.Errorf("notify_timeout, notify_backoff, notify_give_up: %+v, %v", c.NotifyRetry, err)
	}
}
