package main

import (
	"strings"
	"testing"
	"time"
)

// Ensure qd db status reads as one line per fact, with the psql command to
// copy, and says when a configured URL leaves the cluster unused.
func TestRenderDBStatus(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := now.Add(-3 * time.Minute)
	s := dbStatusJSON{Dir: "/s/pg", DataDir: "/s/pg/data", Created: true, Running: true, PID: 42, Since: &since,
		Socket: "/s/pg", URL: "postgres:///qd?host=/s/pg&port=5432&user=qd&sslmode=disable", Owner: "qd",
		DataVersion: "15", SizeBytes: 48_100_000, BinDir: "/usr/lib/postgresql/15/bin", Version: "15.20",
		Log: "/s/pg/server.log", Configured: "postgres://db.example/qd"}
	var b strings.Builder
	renderDBStatus(&b, s, now)
	for _, want := range []string{
		"cluster   /s/pg\n",
		"state     running, pid 42, started 3m ago\n",
		"server    PostgreSQL 15.20 in /usr/lib/postgresql/15/bin\n",
		"data      /s/pg/data, PostgreSQL 15, 48.1 MB\n",
		"runs as   qd\n",
		"socket    /s/pg/.s.PGSQL.5432 (a unix socket only, no TCP)\n",
		"psql      psql 'postgres:///qd?host=/s/pg&port=5432&user=qd&sslmode=disable'\n",
		"in use    no: qd uses postgres://db.example/qd",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("db status lacks %q:\n%s", want, b.String())
		}
	}
}

// Ensure a daemon owns its private cluster's stop only under a service
// manager: systemd's $INVOCATION_ID, or launchd's job com.qd.
func TestUnderService(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{}, false},
		{map[string]string{"INVOCATION_ID": "abc"}, true},
		{map[string]string{"XPC_SERVICE_NAME": "com.qd"}, true},
		{map[string]string{"XPC_SERVICE_NAME": "0"}, false},
		{map[string]string{"XPC_SERVICE_NAME": "application.com.apple.Terminal.1"}, false},
	} {
		if got := underService(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("underService(%v) = %v, want %v", c.env, got, c.want)
		}
	}
}
