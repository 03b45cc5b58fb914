package config

import (
	"strings"
	"testing"
)

// Ensure qd run --check's warnings catch what is valid but likely a
// mistake, name the file and line, and leave a config without such things
// with none.
func TestParse_Warnings(t *testing.T) {
	src := `
agent "wide" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  lanes    = ["a", "b"]
  parallel = 5
}

agent "slow" {
  command  = ["/bin/true"]
  schedule = "@hourly"
}

periodic "often" {
  schedule = "@every 1m"
  agent    = "slow"
}

periodic "remote" {
  schedule = "@daily"
  agent    = "elsewhere"
}

lane "a" {
  max_running = 2
}
`
	c, err := Parse([]byte(src), "/etc/qd/qd.hcl")
	if err != nil {
		t.Fatalf("a config with warnings is valid: %v", err)
	}
	want := []string{
		`/etc/qd/qd.hcl:2: agent "wide": parallel = 5, but its lanes [a b] allow 3 runs at once`,
		`/etc/qd/qd.hcl:14: periodic "often" enqueues about 1440 tasks a day, but agent "slow" wakes 24 times a day with parallel = 1`,
		`/etc/qd/qd.hcl:19: periodic "remote": agent "elsewhere" is not defined in this file; its tasks wait until a daemon that runs it claims them`,
	}
	if len(c.Warnings) != len(want) {
		t.Fatalf("got %d warnings, want %d: %v", len(c.Warnings), len(want), c.Warnings)
	}
	for i, w := range want {
		if got := c.Warnings[i].String(); !strings.HasPrefix(got, w) {
			t.Errorf("warning %d:\ngot  %s\nwant %s…", i, got, w)
		}
	}

	quiet := strings.ReplaceAll(strings.ReplaceAll(src, "parallel = 5", "parallel = 3"), `"@every 1m"`, `"@daily"`)
	quiet = strings.ReplaceAll(quiet, `agent    = "elsewhere"`, `agent    = "slow"`)
	if c, err := Parse([]byte(quiet), "/etc/qd/qd.hcl"); err != nil || len(c.Warnings) != 0 {
		t.Errorf("config without mistakes: warnings %v, error %v", c.Warnings, err)
	}
}
