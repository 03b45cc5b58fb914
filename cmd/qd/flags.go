package main

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/internal/config"
)

// parseInterleaved parses flags that may stand before, between or after the
// positional arguments, and returns the positionals in order. After "--"
// everything is positional.
// A negative number ("-1", "-0.5") that is no flag's value is positional
// too, so that `qd usage -1` is refused for its number, not as a flag.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	if j := negativeArg(fs, args); j >= 0 {
		pos, err := parseInterleaved(fs, args[:j])
		if err != nil {
			return nil, err
		}
		rest, err := parseInterleaved(fs, args[j+1:])
		if err != nil {
			return nil, err
		}
		return append(append(pos, args[j]), rest...), nil
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// negativeArg returns the index of the first argument before any "--"
// that is a negative number and not the value of the flag before it, or
// -1.
func negativeArg(fs *flag.FlagSet, args []string) int {
	for j, a := range args {
		if a == "--" {
			return -1
		}
		if _, err := strconv.ParseFloat(a, 64); err != nil || !strings.HasPrefix(a, "-") {
			continue
		}
		if j > 0 && takesValue(fs, args[j-1]) {
			continue
		}
		return j
	}
	return -1
}

// takesValue reports whether arg is a flag, without "=", that takes the
// next argument as its value.
func takesValue(fs *flag.FlagSet, arg string) bool {
	name, ok := strings.CutPrefix(strings.TrimPrefix(arg, "-"), "-")
	if !ok {
		name = strings.TrimPrefix(arg, "-")
	}
	if !strings.HasPrefix(arg, "-") || strings.Contains(name, "=") {
		return false
	}
	f := fs.Lookup(name)
	if f == nil {
		return false
	}
	b, isBool := f.Value.(interface{ IsBoolFlag() bool })
	return !isBool || !b.IsBoolFlag()
}

// durationValue is a flag holding a duration, read as the config reads
// durations (config.ParseDuration): Go durations ("90s", "1h30m"), days
// ("2d") and bare numbers of seconds; zero is refused unless allowZero,
// negatives always.
type durationValue struct {
	d         *time.Duration
	allowZero bool
}

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	d, err := config.ParseDuration(s)
	if err != nil {
		return err
	}
	if d < 0 || (d == 0 && !v.allowZero) {
		return fmt.Errorf("must be a positive duration, got %q", s)
	}
	*v.d = d
	return nil
}

// durationFlag defines a positive duration flag.
func durationFlag(fs *flag.FlagSet, name string, def time.Duration, usage string) *time.Duration {
	d := def
	fs.Var(durationValue{d: &d}, name, usage)
	return &d
}

// stringList is a flag that may repeat.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// intValue is an int flag with a lower bound.
type intValue struct {
	n        *int
	min, max int
}

func (v intValue) String() string {
	if v.n == nil {
		return "0"
	}
	return strconv.Itoa(*v.n)
}

func (v intValue) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return errors.New("not an integer")
	}
	switch {
	case n < v.min:
		return fmt.Errorf("must be at least %d, got %d", v.min, n)
	case n > v.max:
		return fmt.Errorf("must be at most %d, got %d", v.max, n)
	}
	*v.n = n
	return nil
}

// intFlag defines an int flag that refuses values below lo, and above the
// largest 32-bit integer, which is what the queue stores.
func intFlag(fs *flag.FlagSet, name string, def, lo int, usage string) *int {
	n := def
	fs.Var(intValue{n: &n, min: lo, max: math.MaxInt32}, name, usage)
	return &n
}

// isSet reports whether the flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseID parses a positive task or run id.
func parseID(what, s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, usageErrorf("%s id %q is not a positive integer", what, s)
	}
	return id, nil
}

// oneID checks that args holds exactly one id and parses it.
func oneID(what string, args []string) (int64, error) {
	switch len(args) {
	case 0:
		return 0, usageErrorf("missing %s id", what)
	case 1:
		return parseID(what, args[0])
	}
	return 0, usageErrorf("too many arguments: want one %s id, got %q", what, strings.Join(args, " "))
}

// noArgs refuses positional arguments.
func noArgs(args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}

// listFlags defines the flags the list command cmd ("runs", "tasks") has
// over its filter's state and limit: --state, one of states or empty for
// all, and --limit. The returned function reads --state once the flags are
// parsed: a value not among states is a usage error.
func listFlags[S ~string](fs *flag.FlagSet, cmd string, states []S, state *S, limit *int) func() error {
	names := make([]string, len(states))
	for i, s := range states {
		names[i] = string(s)
	}
	last := len(names) - 1
	v := fs.String("state", "", "only `STATE`: "+strings.Join(names[:last], ", ")+" or "+names[last])
	*limit = 50
	fs.Var(intValue{n: limit, min: 1, max: math.MaxInt32}, "limit", "show at most `N` "+cmd)
	return func() error {
		if *v != "" && !slices.Contains(states, S(*v)) {
			return usageErrorf("%s: --state %q is not one of %v", cmd, *v, states)
		}
		*state = S(*v)
		return nil
	}
}
