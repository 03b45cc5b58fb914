package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// durationValue is the --duration flag: a Go duration ("10s", "1m30s") or
// a bare number of seconds, as in qd (which also takes days, of no use for
// a measurement); zero and negatives are refused.
type durationValue struct{ d *time.Duration }

func (v durationValue) String() string {
	if v.d == nil || *v.d == 0 {
		return "0s"
	}
	return v.d.String()
}

func (v durationValue) Set(s string) error {
	secs, err := strconv.ParseFloat(s, 64)
	d := time.Duration(secs * float64(time.Second))
	if err != nil {
		if d, err = time.ParseDuration(s); err != nil {
			return errors.New("not a duration (want e.g. 10s, 1m, or seconds)")
		}
	}
	if d <= 0 {
		return fmt.Errorf("must be a positive duration, got %q", s)
	}
	*v.d = d
	return nil
}

// dashdash rewrites the flag package's "-name" in its messages as "--name",
// the spelling qdbench documents.
func dashdash(msg string) string {
	return flagName.ReplaceAllString(msg, "$1--$2")
}

var flagName = regexp.MustCompile(`(flag |: )-([a-z])`)

// writeHelp prints the usage, what qdbench does, and every flag with its
// default.
func writeHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n\nFlags:\n", usage, help)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fs.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		if arg == "value" {
			arg = strings.ToUpper(f.Name)
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0s" {
			text += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(tw, "  --%s %s\t%s\n", f.Name, arg, text)
	})
	tw.Flush()
}
