package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/term"
)

// isTerminal reports whether w is a terminal. A character device is not
// enough: /dev/null is one, and output sent there is a script's.
func isTerminal(w io.Writer) bool {
	switch f := w.(type) {
	case *safeTerminal:
		return true
	case *os.File:
		return term.IsTerminal(int(f.Fd()))
	}
	return false
}

// wantJSON reports whether a listing prints JSON: on --json, or when stdout
// is not a terminal.
func (e *Env) wantJSON() bool { return e.JSON || !isTerminal(e.Stdout) }

// writeJSON prints v as indented JSON on one value per call.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// jsonList converts each of xs with to; the list is empty, not null, when
// xs is.
func jsonList[T, J any](xs []T, to func(T) J) []J {
	out := make([]J, 0, len(xs))
	for _, x := range xs {
		out = append(out, to(x))
	}
	return out
}

// table writes aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		cells[i] = strings.ReplaceAll(strings.ReplaceAll(c, "\t", " "), "\n", " ")
	}
	fmt.Fprintln(t.tw, strings.Join(cells, "\t"))
}

func (t *table) flush() error { return t.tw.Flush() }

// relative says when t is from now: "in 12s", "3m ago", "now", or "-" for
// the zero time.
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + duration(d)
	}
	return duration(-d) + " ago"
}

// duration formats d with its two largest units, rounded down: "45s",
// "3m4s", "1h2m", "2d3h". A zero second part is left out ("3m"). Every
// duration qd prints (status, runs, tasks, lanes) goes through it.
func duration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	secs := int64(d / time.Second)
	const minute, hour, day = 60, 3600, 86400
	switch {
	case secs < minute:
		return fmt.Sprintf("%ds", secs)
	case secs < hour:
		return pair(secs/minute, "m", secs%minute, "s")
	case secs < day:
		return pair(secs/hour, "h", secs%hour/minute, "m")
	}
	return pair(secs/day, "d", secs%day/hour, "h")
}

func pair(a int64, au string, b int64, bu string) string {
	if b == 0 {
		return fmt.Sprintf("%d%s", a, au)
	}
	return fmt.Sprintf("%d%s%d%s", a, au, b, bu)
}

// orZero is the time t points to, or the zero time for null.
func orZero(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// truncate cuts s to n runes for a table cell.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// count says n of a thing, one or many: "1 task", "3 tasks".
func count[N ~int | ~int64 | ~uint64](n N, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
