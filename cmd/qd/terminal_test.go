package main

import (
	"bytes"
	"os"
	"testing"
)

// MustPipe returns both ends of a pipe, closed when the test ends.
func MustPipe(tb testing.TB) (r, w *os.File) {
	tb.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

// Ensure what reaches a terminal through safeTerminal holds no control
// character but tab and newline, each shown as an escape, whatever the
// writes are cut into.
func TestSafeTerminal_Write(t *testing.T) {
	tests := []struct {
		name   string
		writes []string
		want   string
	}{
		{"plain", []string{"run 12 done\tok\n"}, "run 12 done\tok\n"},
		{"OSC title", []string{"\x1b]0;pwned\x07summary"}, `\x1b]0;pwned\x07summary`},
		{"clear screen", []string{"a\x1b[2J\x1b[Hb"}, `a\x1b[2J\x1b[Hb`},
		{"carriage return", []string{"ok\rFAILED"}, `ok\rFAILED`},
		{"DEL and NUL", []string{"a\x7fb\x00c"}, `a\x7fb\x00c`},
		{"C1 CSI", []string{"a\u009b2Jb"}, `a\u009b2Jb`},
		{"lone 8-bit CSI", []string{"a\x9b2Jb"}, `a\x9b2Jb`},
		{"bidi override", []string{"abc\u202edef"}, `abc\u202edef`},
		{"UTF-8 kept", []string{"héllo – ✓\n"}, "héllo – ✓\n"},
		{"rune split between writes", []string{"caf\xc3", "\xa9 \xc2", "\x9b"}, `café \u009b`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, w := MustPipe(t)
			st := &safeTerminal{f: w}
			for _, s := range tt.writes {
				if n, err := st.Write([]byte(s)); err != nil || n != len(s) {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", s, n, err, len(s))
				}
			}
			w.Close()
			var got bytes.Buffer
			got.ReadFrom(r)
			if got.String() != tt.want {
				t.Errorf("got %q, want %q", got.String(), tt.want)
			}
		})
	}
}
