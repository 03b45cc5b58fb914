package main

import (
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
)

// Ensure durations show their two largest units, rounded down.
func TestDuration(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{900 * time.Millisecond, "0s"},
		{12 * time.Second, "12s"},
		{3 * time.Minute, "3m"},
		{3*time.Minute + 4*time.Second, "3m4s"},
		{time.Hour + 2*time.Minute + 59*time.Second, "1h2m"},
		{50 * time.Hour, "2d2h"},
		{-10 * time.Second, "10s"},
	} {
		if got := duration(tt.d); got != tt.want {
			t.Errorf("duration(%v) = %q, want %q", tt.d, got, tt.want)
		}
	}
}

// Ensure relative times read naturally both ways.
func TestRelative(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		t    time.Time
		want string
	}{
		{time.Time{}, "-"},
		{now.Add(12 * time.Second), "in 12s"},
		{now.Add(-3 * time.Minute), "3m ago"},
		{now.Add(300 * time.Millisecond), "now"},
		{now.Add(-90 * time.Minute), "1h30m ago"},
		{now.Add(-50 * time.Hour), "2d2h ago"},
	} {
		if got := relative(tt.t, now); got != tt.want {
			t.Errorf("relative(%v) = %q, want %q", tt.t, got, tt.want)
		}
	}
}

func TestRender(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	snap := &api.Snapshot{
		Supervisor: "build-host", Version: "1.2.3", PID: 4242,
		StartedAt: now.Add(-62 * time.Minute), UptimeSeconds: 3720,
		Database:    api.DatabaseStatus{Reachable: false, Error: "dial tcp: connection refused"},
		ConfigError: "qd.hcl:12: agent \"x\": unknown field",
		Agents: []api.AgentStatus{
			{Name: "builder", Schedule: "@every 30s", NextTick: now.Add(12 * time.Second), Running: 1, Parallel: 2},
		},
		Runs: []api.LiveRun{{
			RunID: 91, TaskID: 17, Lane: "proj-a", Agent: "builder", Attempt: 2, PID: ptr(5151),
			AgeSeconds: 125, SilentSeconds: 4, OutputSilentSeconds: 63, LeaseLeftSeconds: 296, CPUSeconds: ptr(71.4),
		}, {
			RunID: 92, TaskID: 18, Lane: "proj-b", Agent: "builder", Attempt: 1,
			AgeSeconds: 400, SilentSeconds: 330, OutputSilentSeconds: 400, LeaseLeftSeconds: -30,
		}},
		Lanes: []api.LaneStatus{
			{Name: "proj-a", MaxRunning: 1, Running: 1, Queued: 3, OldestQueuedAgeSeconds: 7260},
			{Name: "proj-b", MaxRunning: 2, Paused: true},
		},
	}
	var b strings.Builder
	if err := renderStatus(&b, snap, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	t.Logf("\n%s", out)

	// Ensure the operator sees every fact, in the documented units.
	for _, want := range []string{
		"supervisor:  build-host\n",
		"pid:         4242\n",
		"uptime:      1h2m (since 2026-01-02T02:02:05Z)\n",
		"database:    UNREACHABLE: dial tcp: connection refused\n",
		"last reload failed, old config in force: qd.hcl:12",
		"builder  @every 30s  in 12s     1/2",
		"91   17    proj-a  builder  2        5151  2m5s  1m11s  4s      1m3s          4m56s",
		"92   18    proj-b  builder  1        -     6m40s  -  5m30s   6m40s         expired",
		"proj-a  1      no      1        3       2h1m",
		"proj-b  2      yes     0        0       -",
	} {
		if !containsCollapsed(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

// containsCollapsed reports whether out contains want when runs of spaces
// are treated as one, so the test does not depend on column widths.
func containsCollapsed(out, want string) bool {
	collapse := func(s string) string {
		for strings.Contains(s, "  ") {
			s = strings.ReplaceAll(s, "  ", " ")
		}
		return s
	}
	return strings.Contains(collapse(out), collapse(want))
}

func TestRender_Empty(t *testing.T) {
	// Ensure an idle daemon renders without panics and says so.
	var b strings.Builder
	if err := renderStatus(&b, &api.Snapshot{Supervisor: "idle", Database: api.DatabaseStatus{Reachable: true}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Count(b.String(), "(none)"); got != 3 {
		t.Fatalf("%d sections say (none), want 3:\n%s", got, b.String())
	}
	if !strings.Contains(b.String(), "database:    reachable") {
		t.Fatalf("database line missing:\n%s", b.String())
	}
}

// Ensure the header says how runs are contained: the cgroup and its
// controllers, or process groups, why, and what escapes them.
func TestRender_Containment(t *testing.T) {
	for _, tt := range []struct {
		c    api.ContainmentStatus
		want string
	}{
		{api.ContainmentStatus{Kind: "cgroup", Cgroup: "/sys/fs/cgroup/unified/qd/qd-h/1.2.1", Reason: "cpu and memory controller not enabled in cgroup v2 at /sys/fs/cgroup/unified"},
			"contained: cgroup per run under /sys/fs/cgroup/unified/qd/qd-h/1.2.1 (no controllers); cpu and memory controller not enabled in cgroup v2 at /sys/fs/cgroup/unified"},
		{api.ContainmentStatus{Kind: "cgroup", Cgroup: "/sys/fs/cgroup/qd.service/qd-h/1.2.1", Controllers: []string{"cpu", "memory"}},
			"contained: cgroup per run under /sys/fs/cgroup/qd.service/qd-h/1.2.1 (controllers cpu, memory)"},
		{api.ContainmentStatus{Kind: "process group", Reason: "QD_NO_CGROUP is set"},
			"contained: process group only (QD_NO_CGROUP is set): a process that calls setsid outlives its run"},
	} {
		var b strings.Builder
		if err := renderStatus(&b, &api.Snapshot{Supervisor: "h", Containment: tt.c}, time.Now()); err != nil {
			t.Fatal(err)
		}
		if !containsCollapsed(b.String(), tt.want) {
			t.Errorf("status:\n%s\nwant a line %q", b.String(), tt.want)
		}
	}
}

// Ensure qd status lists the box of each agent that has one, and no
// section when none has.
func TestRender_Boxes(t *testing.T) {
	snap := &api.Snapshot{Supervisor: "h", Agents: []api.AgentStatus{
		{Name: "plain", Schedule: "@hourly"},
		{Name: "boxed", Schedule: "@hourly", Box: &api.BoxStatus{User: "nobody (uid 65534, gid 65534)", Workdir: "fresh, kept: failed",
			Sandbox: &api.SandboxStatus{Read: []string{"/srv/repos"}, Write: []string{"/srv/out"}, Network: "none", Enforced: "Landlock ABI 7"}}},
	}}
	var b strings.Builder
	if err := renderStatus(&b, snap, time.Now()); err != nil {
		t.Fatal(err)
	}
	want := "boxed as nobody (uid 65534, gid 65534); workdir fresh, kept: failed; sandbox: network none, read /srv/repos, write /srv/out (Landlock ABI 7)"
	if !strings.Contains(b.String(), "\nBOXES\n") || !containsCollapsed(b.String(), want) || strings.Contains(b.String(), "plain as") {
		t.Errorf("status:\n%s\nwant a BOXES section with the line %q alone", b.String(), want)
	}
	b.Reset()
	snap.Agents = snap.Agents[:1]
	if err := renderStatus(&b, snap, time.Now()); err != nil || strings.Contains(b.String(), "BOXES") {
		t.Errorf("status without boxes:\n%s", b.String())
	}
}

// Ensure a run's CPU time and memory peak read naturally, and show "-"
// when not measured.
func TestUsageText(t *testing.T) {
	ms := func(n int64) *time.Duration { d := time.Duration(n) * time.Millisecond; return &d }
	for d, want := range map[*time.Duration]string{nil: "-", ms(42): "42ms", ms(1500): "1.5s", ms(125_000): "2m5s"} {
		if got := cpuText(d); got != want {
			t.Errorf("cpuText(%v) = %q, want %q", d, got, want)
		}
	}
	n := func(v int64) *int64 { return &v }
	for b, want := range map[*int64]string{nil: "-", n(512): "512B", n(1536): "1.5KiB", n(300 << 20): "300.0MiB", n(3 << 30): "3.0GiB"} {
		if got := bytesText(b); got != want {
			t.Errorf("bytesText(%v) = %q, want %q", b, got, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// Ensure qd status shows the limits and budgets the agents use, and when
// a spent budget resumes, and no such section for a daemon without them.
func TestRender_Spending(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	next := now.Add(2 * time.Second)
	s := &api.Snapshot{Supervisor: "d",
		Limits: []api.Limit{{Name: "llm-api", Rate: "60/1m", Burst: 10, Available: -4, NextUnitAt: &next, Agents: []string{"sum"}}},
		Budgets: []api.Budget{{Name: "llm-daily", Max: 5, Spent: 5.02, Exhausted: true, Period: "1d", Timezone: "UTC",
			PeriodEnd: time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)}}}
	var b strings.Builder
	if err := renderStatus(&b, s, now); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"LIMITS", "llm-api  60/1m  10     -4         in 2s      sum",
		"llm-daily  5.02 of 5.00  1d UTC  spent; resumes 2026-12-03 00:00 UTC"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if err := renderStatus(&b, &api.Snapshot{Supervisor: "d"}, now); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "LIMITS") || strings.Contains(b.String(), "BUDGETS") {
		t.Errorf("status of a daemon without limits shows them:\n%s", b.String())
	}
}
