package ui

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Ensure visible turns every control character of an agent's text into a
// visible escape, keeps line endings and tabs, and leaves other text as
// it is.
func TestVisible(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text, ünïcode ✓", "plain text, ünïcode ✓"},
		{"a\nb\tc", "a\nb\tc"},
		{"crlf\r\nline", "crlf\nline"},
		{"bare\revent: x", `bare\revent: x`},
		{"\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"nul\x00del\x7f", `nul\x00del\x7f`},
		{"c1\u0085", `c1\u0085`},
		{"bad \xff utf-8", `bad \xff utf-8`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
	}
	for _, tt := range tests {
		if got := visible(tt.in); got != tt.want {
			t.Errorf("visible(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Ensure indent writes what json.Indent writes, and stops at its limit.
func TestIndent(t *testing.T) {
	for _, js := range []string{`{}`, `[]`, ` { "a" : [1, 2, {"b": "x,]\"y"}], "c": {}, "d": [ ] } `, `"s"`, `12`,
		`[[[[["deep"]]]]]`, `{"a":{"b":{"c":null}}}`} {
		var want bytes.Buffer
		if err := json.Indent(&want, []byte(js), "", "  "); err != nil {
			t.Fatal(err)
		}
		got, whole := indent([]byte(js), 1<<20)
		if got != strings.TrimSpace(want.String()) || !whole {
			t.Errorf("indent(%s) = %q (whole %v), want %q", js, got, whole, want.String())
		}
	}
	deep := strings.Repeat("[", 64) + strings.Repeat("]", 64)
	got, whole := indent([]byte(strings.Repeat(deep+",", 5000)+"1"), 1000)
	if whole || len(got) > 1000+200 {
		t.Errorf("indent past its limit: %d bytes, whole %v", len(got), whole)
	}
}
