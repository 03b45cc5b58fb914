package ui

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/lease"
)

// funcs are the templates' helpers; all of them return plain text, which
// the templates escape.
var funcs = template.FuncMap{
	"ago":      ago,
	"secs":     secs,
	"when":     when,
	"count":    count,
	"number":   number,
	"pretty":   pretty,
	"exit":     exit,
	"f1":       func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) },
	"ms":       func(t time.Time) int64 { return t.UnixMilli() },
	"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"upper":    strings.ToUpper,
	"states":   func() []string { return []string{"queued", "running", "done", "failed", "cancelled"} },
	"short":    short,
	"finished": func(s lease.TaskState) bool { return s.Finished() },
}

// short cuts a text (or a payload) to n characters, marking the cut.
func short(v any, n int) string {
	var s string
	switch x := v.(type) {
	case json.RawMessage:
		s = string(x)
	case string:
		s = x
	default:
		s = fmt.Sprint(x)
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// ago says how long ago (or how soon) t is, in the largest two units.
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Since(t)
	if d < 0 {
		return "in " + secs(-d.Seconds())
	}
	return secs(d.Seconds()) + " ago"
}

// secs writes a number of seconds as 45s, 3m05s, 2h10m or 3d4h.
func secs(f float64) string {
	s := int64(math.Round(f))
	switch {
	case f < 10 && f != math.Trunc(f):
		return strconv.FormatFloat(f, 'f', 1, 64) + "s"
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%02dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	t = t.Local()
	if time.Since(t) < 20*time.Hour && time.Since(t) > -20*time.Hour {
		return t.Format("15:04:05")
	}
	return t.Format("2006-01-02 15:04")
}

// number writes n with thousands separators.
func number(v any) string {
	var s string
	switch n := v.(type) {
	case int:
		s = strconv.Itoa(n)
	case int64:
		s = strconv.FormatInt(n, 10)
	default:
		s = fmt.Sprint(v)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// count writes a count, "about" when it is an estimate.
func count(c lease.Count) string {
	if c.Estimated {
		return "about " + number(c.N)
	}
	return number(c.N)
}

// pretty indents a JSON payload, or gives it as it is when it is not JSON.
func pretty(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// exit says how a run's child ended: its exit code or signal.
func exit(code *int, signal string) string {
	switch {
	case signal != "":
		return signal
	case code != nil:
		return "exit " + strconv.Itoa(*code)
	}
	return "—"
}
