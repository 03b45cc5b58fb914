package main

import (
	"fmt"
	"io"
	"os"
	"unicode/utf8"
)

// safeTerminal is a terminal that shows every control character written
// to it as an escape instead of obeying it: C0 controls but tab and
// newline (so \r and \x1b), DEL, the C1 controls (U+0080 to U+009F, and
// lone bytes 0x80 to 0xFF, which some terminals take for C1), and the
// Unicode controls that reorder text (U+202A to U+202E, U+2066 to U+2069).
// Text from agents (summaries, output, payloads, errors) reaches a terminal
// only through it, so no agent can retitle the window, clear the screen,
// move the cursor or write over a line. qd's own control sequences go
// through writeRaw. A rune split between two writes is held until the
// next one.
type safeTerminal struct {
	f       *os.File
	partial []byte // the start of a rune the last write ended in
}

// safeOutput wraps w when it is a terminal; anything else (a pipe, a file,
// /dev/null) gets qd's output byte for byte.
func safeOutput(w io.Writer) io.Writer {
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		return &safeTerminal{f: f}
	}
	return w
}

func (t *safeTerminal) Write(p []byte) (int, error) {
	in := p
	if len(t.partial) > 0 {
		in = append(t.partial, p...)
		t.partial = nil
	}
	out := make([]byte, 0, len(in))
	for len(in) > 0 {
		if !utf8.FullRune(in) {
			t.partial = append([]byte(nil), in...)
			break
		}
		r, size := utf8.DecodeRune(in)
		switch {
		case r == utf8.RuneError && size == 1:
			out = fmt.Appendf(out, `\x%02x`, in[0])
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f:
			out = append(out, controlName(r)...)
		case r >= 0x80 && r <= 0x9f, r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, in[:size]...)
		}
		in = in[size:]
	}
	if _, err := t.f.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// controlName is how a C0 control or DEL is shown.
func controlName(r rune) string {
	switch r {
	case '\r':
		return `\r`
	case 0x1b:
		return `\x1b`
	}
	return fmt.Sprintf(`\x%02x`, r)
}

// writeRaw writes qd's own control sequence s, which a safeTerminal would
// show as text.
func writeRaw(w io.Writer, s string) {
	if t, ok := w.(*safeTerminal); ok {
		w = t.f
	}
	io.WriteString(w, s)
}

// rawOutput is w without its safeTerminal, for output the user asked to
// get byte for byte (qd logs --raw).
func rawOutput(w io.Writer) io.Writer {
	if t, ok := w.(*safeTerminal); ok {
		return t.f
	}
	return w
}
