package config

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	// Ensure Go durations, days and bare seconds are read alike, and what
	// is neither is refused.
	const day = 24 * time.Hour
	for _, tt := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"90s", 90 * time.Second, true},
		{"1h30m", 90 * time.Minute, true},
		{"500ms", 500 * time.Millisecond, true},
		{"-5m", -5 * time.Minute, true},
		{"30", 30 * time.Second, true},
		{"0.5", 500 * time.Millisecond, true},
		{".25", 250 * time.Millisecond, true},
		{"-1", -time.Second, true},
		{"0", 0, true},
		{"2d", 2 * day, true},
		{"1d12h", 36 * time.Hour, true},
		{"1.5d", 36 * time.Hour, true},
		{"1d30m10s", day + 30*time.Minute + 10*time.Second, true},
		{"-1d", -day, true},
		{"106751d", 106751 * day, true},
		{"106752d", 0, false},
		{"1e3", 0, false},
		{"inf", 0, false},
		{"d", 0, false},
		{"1d-2h", 0, false},
		{"1h2d", 0, false},
		{"10 s", 0, false},
		{"soon", 0, false},
		{"", 0, false},
	} {
		got, err := ParseDuration(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestLoad_DurationUnits(t *testing.T) {
	// Ensure the config reads days and bare numbers of seconds, quoted or
	// not, wherever it reads a duration, "@every" included.
	c := MustLoad(t, "testdata/units/qd.hcl")
	if got, want := [2]time.Duration{c.ShutdownGrace, c.Retention}, [2]time.Duration{45 * time.Second, 30 * 24 * time.Hour}; got != want {
		t.Errorf("shutdown_grace, retention: got %v, want %v", got, want)
	}
	a := c.Agents[0]
	got := [...]time.Duration{a.Lease, a.Heartbeat, a.Timeout, a.StallTimeout, a.KillGrace, a.RetryBackoff}
	want := [...]time.Duration{24 * time.Hour, time.Hour, 36 * time.Hour, 90 * time.Second, 2500 * time.Millisecond, 12 * time.Hour}
	if got != want {
		t.Errorf("agent durations: got %v, want %v", got, want)
	}
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if next := a.Sched.Next(from); !next.Equal(from.Add(24 * time.Hour)) {
		t.Errorf("@every 1d: next after %v is %v, want a day later", from, next)
	}
}
