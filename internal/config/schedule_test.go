package config

import (
	"strings"
	"testing"
	"time"
)

func TestParseSchedule(t *testing.T) {
	// Ensure the forms the docs promise are accepted and those robfig/cron
	// accepts but misreads, or panics on, are refused with a reason.
	from := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		spec string
		next time.Time // zero: skip the check
		err  string    // "" when the spec is valid
	}{
		{spec: "@hourly", next: time.Date(2025, 1, 1, 1, 0, 0, 0, time.UTC).In(time.Local)},
		{spec: "@every 30s", next: from.Add(30 * time.Second)},
		{spec: "CRON_TZ=UTC */5 * * * *", next: from.Add(5 * time.Minute)},
		{spec: "TZ=UTC 0 0 29 2 *", next: time.Date(2028, 2, 29, 0, 0, 0, 0, time.UTC)},
		{spec: "TZ=UTC @every 1m", next: from.Add(time.Minute)},
		{spec: "@every 1d", next: from.Add(24 * time.Hour)},
		{spec: "@every 90", next: from.Add(90 * time.Second)},
		{spec: "TZ=UTC @every 1d12h", next: from.Add(36 * time.Hour)},
		{spec: "@every 1.5", err: "whole number of seconds"},
		{spec: "@every 0s", err: "at least 1s"},
		{spec: "@every -5m", err: "at least 1s"},
		{spec: "@every soon", err: `"soon" is not a duration`},
		{spec: "0 0 30 2 *", err: "never fires"},
		{spec: "0 0 31 4,6,9,11 *", err: "never fires"},
		{spec: "TZ=0", err: "must be followed by a space"},
		{spec: "CRON_TZ=Europe/Paris", err: "must be followed by a space"},
		{spec: "TZ= * * * * *", err: "empty time zone"},
		{spec: "CRON_TZ=Mars/Base * * * * *", err: `unknown time zone "Mars/Base"`},
		{spec: "* * * *", err: "expected exactly 5 fields"},
		{spec: "@fortnightly", err: "unrecognized descriptor"},
	} {
		t.Run(tt.spec, func(t *testing.T) {
			sched, err := ParseSchedule(tt.spec)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := sched.Next(from); !tt.next.IsZero() && !got.Equal(tt.next) {
				t.Fatalf("next: got %v, want %v", got, tt.next)
			}
		})
	}
}
