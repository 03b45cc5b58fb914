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
	"unicode/utf8"

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
	"visible":  visible,
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
		return visible(s)
	}
	return visible(string(r[:n])) + "…"
}

// visible makes the control characters of a text from an agent (a
// summary, output, a payload) into visible escapes, as qd's terminal
// output does: C0 controls (\r, \x1b), DEL, C1 controls, bytes that are
// not UTF-8 and the controls that reorder text (\u202e). A line ending
// (\n, \r\n) and a tab stay as they are. Left raw, a carriage return
// would end a line of the page's event stream, and the others would hide
// or disguise what the agent wrote.
func visible(s string) string {
	clean := true
	for i := 0; i < len(s) && clean; i++ { // ASCII text needs no copy
		clean = s[i] >= 0x20 && s[i] != 0x7f && s[i] < 0x80 || s[i] == '\n' || s[i] == '\t'
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\r' && strings.HasPrefix(s[i+1:], "\n"):
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r == '\r':
			b.WriteString(`\r`)
		case r == utf8.RuneError && n == 1, r < 0x20, r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r >= 0x80 && r < 0xa0, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// instant reads a time a template holds: a time, or one that may be nil
// (null on the wire: not happened).
func instant(v any) time.Time {
	switch t := v.(type) {
	case time.Time:
		return t
	case *time.Time:
		if t != nil {
			return *t
		}
	}
	return time.Time{}
}

// ago says how long ago (or how soon) t is, in the largest two units.
func ago(v any) string {
	t := instant(v)
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

func when(v any) string {
	t := instant(v)
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

// maxPretty is how much of a payload's indented text the task page
// shows; the JSON twin has all of it.
const maxPretty = 64 << 10

// pretty indents a JSON payload, or gives it as it is when it is not JSON,
// cut at maxPretty bytes: indenting multiplies the size of a deeply nested
// payload.
func pretty(raw json.RawMessage) string {
	text, whole := string(raw[:min(len(raw), maxPretty)]), len(raw) <= maxPretty
	if json.Valid(raw) {
		text, whole = indent(raw, maxPretty)
	}
	text = visible(text)
	if !whole {
		text += fmt.Sprintf("\n… (cut at %d KiB; the page's JSON twin, /api/tasks/ID, has all %d bytes)", maxPretty>>10, len(raw))
	}
	return text
}

// indent writes the valid JSON text js with two spaces per level, as
// json.Indent does, and stops once the text reaches limit bytes; it
// reports whether the text is whole.
func indent(js []byte, limit int) (string, bool) {
	var b bytes.Buffer
	depth := 0
	newline := func() {
		b.WriteByte('\n')
		for range depth {
			b.WriteString("  ")
		}
	}
	for i := 0; i < len(js); i++ {
		if b.Len() >= limit {
			return b.String(), false
		}
		switch c := js[i]; c {
		case '"':
			end := stringEnd(js, i)
			b.Write(js[i:end])
			i = end - 1
		case '{', '[':
			b.WriteByte(c)
			if j := nextToken(js, i+1); j < len(js) && (js[j] == '}' || js[j] == ']') {
				b.WriteByte(js[j])
				i = j
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			newline()
		case ':':
			b.WriteString(": ")
		case ' ', '\t', '\r', '\n':
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// stringEnd returns the index just past the JSON string starting at i.
func stringEnd(js []byte, i int) int {
	for j := i + 1; j < len(js); j++ {
		switch js[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(js)
}

// nextToken returns the index of the first byte at or after i that is not
// JSON whitespace.
func nextToken(js []byte, i int) int {
	for i < len(js) && (js[i] == ' ' || js[i] == '\t' || js[i] == '\r' || js[i] == '\n') {
		i++
	}
	return i
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
