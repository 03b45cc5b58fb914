package config

import (
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// cronParser takes the five standard fields and descriptors such as
// @hourly and "@every 30s", each optionally after a CRON_TZ= or TZ= prefix.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule parses a cron schedule and rejects what robfig/cron accepts
// but cannot mean: intervals under a second (it runs "@every 0s" every
// second), dates that never come (30 February) and malformed time zone
// prefixes (on which it panics).
func ParseSchedule(spec string) (sched cron.Schedule, err error) {
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("schedule %q cannot be parsed: %v", spec, r)
		}
	}()
	rest, err := checkZone(spec)
	if err != nil {
		return nil, err
	}
	if err := checkEvery(rest); err != nil {
		return nil, err
	}
	sched, err = cronParser.Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("schedule %q: %w", spec, err)
	}
	if sched.Next(time.Now()).IsZero() {
		return nil, fmt.Errorf("schedule %q never fires: no date in the next five years matches it", spec)
	}
	return sched, nil
}

// checkZone validates a CRON_TZ= or TZ= prefix and returns the rest.
func checkZone(spec string) (string, error) {
	if !strings.HasPrefix(spec, "TZ=") && !strings.HasPrefix(spec, "CRON_TZ=") {
		return spec, nil
	}
	prefix, rest, ok := strings.Cut(spec, " ")
	_, zone, _ := strings.Cut(prefix, "=")
	if !ok || strings.TrimSpace(rest) == "" {
		return "", fmt.Errorf("schedule %q: the time zone must be followed by a space and a schedule, as in \"CRON_TZ=Europe/Paris 0 9 * * *\"", spec)
	}
	if zone == "" {
		return "", fmt.Errorf("schedule %q: empty time zone", spec)
	}
	if _, err := time.LoadLocation(zone); err != nil {
		return "", fmt.Errorf("schedule %q: unknown time zone %q", spec, zone)
	}
	return strings.TrimSpace(rest), nil
}

// checkEvery rejects "@every" intervals robfig/cron would round up to one
// second or truncate.
func checkEvery(spec string) error {
	arg, ok := strings.CutPrefix(spec, "@every")
	if !ok {
		return nil
	}
	arg = strings.TrimSpace(arg)
	d, err := time.ParseDuration(arg)
	switch {
	case err != nil:
		return fmt.Errorf("schedule %q: %q is not a duration (write it like \"30s\" or \"5m\")", spec, arg)
	case d < time.Second:
		return fmt.Errorf("schedule %q: the interval must be at least 1s, got %q", spec, arg)
	case d%time.Second != 0:
		return fmt.Errorf("schedule %q: the interval must be a whole number of seconds, got %q", spec, arg)
	}
	return nil
}
