package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MustComplete runs `qd __complete WORDS...` with the config
// testdata/complete/qd.hcl and a database that cannot be reached, and
// returns the words offered, descriptions left out.
func MustComplete(tb testing.TB, words ...string) []string {
	tb.Helper()
	var out, errb bytes.Buffer
	env := newEnv(strings.NewReader(""), &out, &errb, func(k string) string {
		return map[string]string{"QD_CONFIG": "testdata/complete/qd.hcl", "QD_DATABASE_URL": "nowhere://x"}[k]
	})
	defer env.Close()
	if err := dispatch(context.Background(), env, append([]string{completeHelper}, words...)); err != nil || errb.Len() > 0 {
		tb.Fatalf("qd __complete %q: %v %s", words, err, errb.String())
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if word, _, _ := strings.Cut(line, "\t"); word != "" {
			got = append(got, word)
		}
	}
	return got
}

// Ensure the completion helper offers commands, subcommands, flags, the
// config's agents and lanes, states and shells where each belongs, and
// nothing where nothing fits.
func TestComplete(t *testing.T) {
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"en"}, "enqueue"},
		{[]string{"l"}, "lane limit logs"},
		{[]string{"lane", ""}, "set list"},
		{[]string{"lane", "s"}, "set"},
		{[]string{"help", "ru"}, "run-now runs run"},
		{[]string{"help", "lane", "l"}, "list"},
		{[]string{"enqueue", "--ag"}, "--agent"},
		{[]string{"enqueue", "--agent", ""}, "build hello"},
		{[]string{"enqueue", "--agent", "h"}, "hello"},
		{[]string{"enqueue", "--agent=h"}, "--agent=hello"},
		{[]string{"enqueue", "-agent", "b"}, "build"},
		{[]string{"enqueue", "--lane", ""}, "demo reports web"},
		{[]string{"claim", "--lane", "web", "--lane", "d"}, "demo"},
		{[]string{"run-now", ""}, "build hello"},
		{[]string{"run-now", "hello", ""}, ""},
		{[]string{"run-now", "--lane", "web", "h"}, "hello"},
		{[]string{"lane", "set", ""}, "demo reports web"},
		{[]string{"lane", "set", "--pause", "w"}, "web"},
		{[]string{"tasks", "--state", "f"}, "failed"},
		{[]string{"runs", "--state=a"}, "--state=abandoned"},
		{[]string{"tasks", "--json", "--st"}, "--state"},
		{[]string{"run", "--config", ""}, filesDirective},
		{[]string{"status", "--socket=/r"}, filesDirective},
		{[]string{"completion", ""}, "bash zsh fish"},
		{[]string{"complete", "12", "--summary", ""}, ""},
		{[]string{"enqueue", "--", "--ag"}, ""},
		{[]string{"frobnicate", ""}, ""},
	} {
		if got := strings.Join(MustComplete(t, tt.words...), " "); got != tt.want {
			t.Errorf("qd __complete %q: got %q, want %q", tt.words, got, tt.want)
		}
	}
}

// Ensure --config on the line being completed chooses where agents come
// from, in either spelling, and an unreadable config gives no agents
// rather than an error.
func TestComplete_ConfigOnTheLine(t *testing.T) {
	other := filepath.Join(t.TempDir(), "other.hcl")
	if err := os.WriteFile(other, []byte(`agent "other" {
  command  = ["other"]
  schedule = "@hourly"
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		words []string
		want  string
	}{
		{[]string{"enqueue", "--config", other, "--agent", ""}, "other"},
		{[]string{"run-now", "--config=" + other, ""}, "other"},
		{[]string{"enqueue", "--config", "testdata/nosuch.hcl", "--agent", ""}, ""},
	} {
		if got := strings.Join(MustComplete(t, tt.words...), " "); got != tt.want {
			t.Errorf("qd __complete %q: got %q, want %q", tt.words, got, tt.want)
		}
	}
}
