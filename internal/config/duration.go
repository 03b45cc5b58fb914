package config

import (
	"errors"
	"math"
	"regexp"
	"strconv"
	"time"
)

var (
	errNotDuration = errors.New(`not a duration: write a number with a unit, such as "30s", "5m", "1h" or "2d", or a number of seconds`)
	errTooLong     = errors.New("too long: a duration is at most 106751d")

	bareSeconds = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$`)
	leadingDays = regexp.MustCompile(`^([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)d((?:[0-9.]+[a-zµμ]+)*)$`)
)

// ParseDuration reads a duration the one way qd reads them all, in the
// config file, in "@every" schedules and on the command line: a Go duration
// ("90s", "1h30m"), which may start with a number of days ("2d", "1d12h"),
// or a bare number of seconds ("30", "0.5"). Callers check the sign. The
// error says what is wrong without quoting s: "not a duration: write ...".
func ParseDuration(s string) (time.Duration, error) {
	if bareSeconds.MatchString(s) {
		f, _ := strconv.ParseFloat(s, 64)
		return fromFloat(f * float64(time.Second))
	}
	if m := leadingDays.FindStringSubmatch(s); m != nil {
		return withDays(m[1], m[2], m[3])
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, errNotDuration
	}
	return d, nil
}

// withDays adds a number of days to the Go duration rest ("" for none).
func withDays(sign, days, rest string) (time.Duration, error) {
	var part time.Duration
	if rest != "" {
		var err error
		if part, err = time.ParseDuration(rest); err != nil {
			return 0, errNotDuration
		}
	}
	f, _ := strconv.ParseFloat(days, 64)
	ns := f*float64(24*time.Hour) + float64(part)
	if sign == "-" {
		ns = -ns
	}
	return fromFloat(ns)
}

// fromFloat turns a number of nanoseconds into a duration, refusing what a
// duration cannot hold.
func fromFloat(ns float64) (time.Duration, error) {
	if math.Abs(ns) >= math.MaxInt64 {
		return 0, errTooLong
	}
	return time.Duration(math.Round(ns)), nil
}
