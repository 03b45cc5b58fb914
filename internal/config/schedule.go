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
	every, err := checkEvery(spec, rest)
	switch {
	case err != nil:
		return nil, err
	case every > 0:
		return cron.Every(every), nil
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

// checkEvery parses the interval of an "@every" schedule (0 for another
// kind) as ParseDuration reads durations, so that "@every 1d" works, and
// rejects what robfig/cron would round up to one second or truncate.
func checkEvery(spec, rest string) (time.Duration, error) {
	arg, ok := strings.CutPrefix(rest, "@every")
	if !ok {
		return 0, nil
	}
	arg = strings.TrimSpace(arg)
	d, err := ParseDuration(arg)
	switch {
	case err != nil:
		return 0, fmt.Errorf("schedule %q: %q is %v", spec, arg, err)
	case d < time.Second:
		return 0, fmt.Errorf("schedule %q: the interval must be at least 1s, got %q", spec, arg)
	case d%time.Second != 0:
		return 0, fmt.Errorf("schedule %q: the interval must be a whole number of seconds, got %q", spec, arg)
	}
	return d, nil
}
