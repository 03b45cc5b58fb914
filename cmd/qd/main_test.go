package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure flags parse wherever they stand among the positional arguments.
func TestParseInterleaved(t *testing.T) {
	tests := []struct {
		args    []string
		pos     []string
		summary string
		n       int
	}{
		{[]string{"42", "--summary", "done"}, []string{"42"}, "done", 0},
		{[]string{"--summary=done", "42"}, []string{"42"}, "done", 0},
		{[]string{"a", "-n", "3", "b", "--summary", "x y"}, []string{"a", "b"}, "x y", 3},
		{[]string{"a", "--", "-n", "b"}, []string{"a", "-n", "b"}, "", 0},
		{[]string{"-"}, []string{"-"}, "", 0},
		{nil, nil, "", 0},
	}
	for _, tt := range tests {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		summary := fs.String("summary", "", "")
		n := fs.Int("n", 0, "")
		pos, err := parseInterleaved(fs, tt.args)
		if err != nil {
			t.Fatalf("%q: %v", tt.args, err)
		}
		if !reflect.DeepEqual(pos, tt.pos) || *summary != tt.summary || *n != tt.n {
			t.Errorf("%q: got %q summary=%q n=%d, want %q %q %d", tt.args, pos, *summary, *n, tt.pos, tt.summary, tt.n)
		}
	}
}

// Ensure durations accept Go syntax, days and seconds, as the config does,
// and refuse zero and negatives unless zero is allowed.
func TestDurationValue_Set(t *testing.T) {
	tests := []struct {
		in        string
		allowZero bool
		want      time.Duration
		ok        bool
	}{
		{"90s", false, 90 * time.Second, true},
		{"1h30m", false, 90 * time.Minute, true},
		{"5", false, 5 * time.Second, true},
		{"0.5", false, 500 * time.Millisecond, true},
		{"2d", false, 48 * time.Hour, true},
		{"1d12h", false, 36 * time.Hour, true},
		{"0", false, 0, false},
		{"0", true, 0, true},
		{"-1s", true, 0, false},
		{"soon", false, 0, false},
	}
	for _, tt := range tests {
		var d time.Duration
		err := durationValue{d: &d, allowZero: tt.allowZero}.Set(tt.in)
		if (err == nil) != tt.ok || d != tt.want {
			t.Errorf("Set(%q, allowZero=%v) = %v, %v; want %v ok=%v", tt.in, tt.allowZero, d, err, tt.want, tt.ok)
		}
	}
}

// Ensure errors map to the documented exit codes.
func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("boom"), 1},
		{usageErrorf("bad"), 2},
		{fmt.Errorf("claim: %w", lease.ErrNoWork), 3},
		{fmt.Errorf("complete run 1: %w", lease.ErrLeaseLost), 4},
		{fmt.Errorf("enqueue: %w", lease.ErrInvalid), 2},
		{fmt.Errorf("show: %w", lease.ErrNotFound), 1},
		{&ExitError{Code: 4, Err: errors.New("x")}, 4},
	}
	for _, tt := range tests {
		if got := exitCode(tt.err); got != tt.want {
			t.Errorf("exitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// Ensure a mistyped command gets the nearest name, and nonsense gets none.
func TestSuggest(t *testing.T) {
	names := []string{"claim", "complete", "cancel", "enqueue", "heartbeat", "lane set", "tasks", "runs"}
	tests := []struct{ in, want string }{
		{"compelte", "complete"},
		{"enque", "enqueue"},
		{"hearbeat", "heartbeat"},
		{"task", "tasks"},
		{"lane st", "lane set"},
		{"xyzzyplugh", ""},
	}
	for _, tt := range tests {
		if got := suggest(tt.in, names); got != tt.want {
			t.Errorf("suggest(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Ensure a mistyped flag gets the flag it begins or one a letter or two
// away, and no guess when none is that close.
func TestSuggestFlag(t *testing.T) {
	names := []string{"lane", "agent", "state", "limit", "json", "db", "config", "older-than", "dry-run"}
	tests := []struct{ in, want string }{
		{"stat", "state"},
		{"agnet", "agent"},
		{"older", "older-than"},
		{"jsno", "json"},
		{"dry", "dry-run"},
		{"colour", ""},
		{"l", ""}, // begins lane and limit
		{"x", ""},
	}
	for _, tt := range tests {
		if got := suggestFlag(tt.in, names); got != tt.want {
			t.Errorf("suggestFlag(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// mainResult runs Main with no database behind the URL: a command that gets
// as far as opening one fails with exit 1 and "unknown scheme".
func mainResult(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	args = append(args, "--db", "nowhere://x")
	code = Main(context.Background(), args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

// Ensure usage errors exit 2 with one line naming the problem, before any
// database is touched.
func TestMain_UsageErrors(t *testing.T) {
	tests := []struct {
		args  []string
		stdin string
		want  string
	}{
		{[]string{"compelte", "1"}, "", `did you mean "complete"`},
		{[]string{"complete"}, "", "missing run id"},
		{[]string{"complete", "1", "2"}, "", "too many arguments"},
		{[]string{"complete", "abc"}, "", `run id "abc" is not a positive integer`},
		{[]string{"complete", "1", "--bogus"}, "", "flag provided but not defined: --bogus"},
		{[]string{"tasks", "--stat", "failed"}, "", "did you mean --state?"},
		{[]string{"--verison"}, "", `did you mean "qd version"?`},
		{[]string{"heartbeat", "1", "--lease", "0s"}, "", "--lease: must be a positive duration"},
		{[]string{"fail", "1", "--retry-in=-5s"}, "", "--retry-in: must be a positive duration"},
		{[]string{"claim", "--wait", "-1"}, "", "--wait"},
		{[]string{"enqueue", "--lane", "l", "--agent", "a", "{nope"}, "", "payload is not valid JSON"},
		{[]string{"enqueue", "--lane", "l", "--agent", "a", "-"}, "[1,", "payload is not valid JSON"},
		{[]string{"enqueue", "--lane", "l", "--agent", "a", "-"}, `"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"`, "more than"},
		{[]string{"enqueue", "--lane", "Bad Lane", "--agent", "a"}, "", `lane "Bad Lane"`},
		{[]string{"enqueue", "--lane", "l"}, "", "--agent is required"},
		{[]string{"enqueue", "--agent", "a", "--priority", "2147483648"}, "", "--priority: must be at most 2147483647, got 2147483648"},
		{[]string{"enqueue", "--agent", "a", "--priority", "-2147483649"}, "", "--priority: must be at least -2147483648"},
		{[]string{"enqueue", "--agent", "a", "--max-attempts", "2147483648"}, "", "--max-attempts: must be at most 2147483647"},
		{[]string{"enqueue", "--agent", "a", "--key", strings.Repeat("k", 40000)}, "", "--key: dedupe key is 40000 bytes, more than the 1024-byte limit"},
		{[]string{"enqueue", "--agent", "a", `{"s": "\u0000"}`}, "", "payload contains \\u0000"},
		{[]string{"lane", "set", "x", "--max-running", "2147483648"}, "", "--max-running: must be at most 2147483647"},
		{[]string{"enqueue", "--agent", "a", "--in", "5s", "--at", "2030-01-01T00:00:00Z"}, "", "cannot be used together"},
		{[]string{"enqueue", "--agent", "a", "--at", "tomorrow"}, "", "--at"},
		{[]string{"lane", "set", "x", "--pause", "--resume"}, "", "cannot be used together"},
		{[]string{"lane", "set", "x", "--max-running", "0"}, "", "--max-running: must be at least 1"},
		{[]string{"lane", "lsit"}, "", `did you mean "lane list"`},
		{[]string{"tasks", "--state", "sleeping"}, "", `--state "sleeping"`},
		{[]string{"prune"}, "", "--older-than is required"},
		{[]string{"prune", "--older-than", "-1h"}, "", "--older-than"},
		{[]string{"prune", "--older-than", "30 days"}, "", "--older-than: not a duration"},
		{[]string{"status", "--interval", "0"}, "", "--interval: must be a positive duration"},
	}
	for _, tt := range tests {
		code, stdout, stderr := mainResult(t, tt.stdin, tt.args...)
		if code != ExitUsage || stdout != "" || !strings.Contains(stderr, tt.want) ||
			!strings.HasPrefix(stderr, "qd: ") || strings.Count(stderr, "\n") != 1 {
			t.Errorf("qd %q: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q",
				tt.args, code, stdout, stderr, tt.want)
		}
	}
}

// Ensure valid input reaches the database (here: an unknown backend, exit 1).
func TestMain_ReachesBackend(t *testing.T) {
	code, _, stderr := mainResult(t, "", "complete", "42", "--summary", "done")
	if code != ExitFailure || !strings.Contains(stderr, `unknown scheme "nowhere"`) {
		t.Errorf("exit %d, stderr %q; want exit 1 naming the scheme", code, stderr)
	}
}

// Ensure every command that opens the queue refuses a declined backend's
// URL with the same words, the backend's own.
func TestMain_SameRefusalEverywhere(t *testing.T) {
	const want = "qd: open queue: redis:// is not supported: Redis Streams was considered and declined as a backend; see docs/decisions/queue-backend.md\n"
	args := map[string][]string{
		"claim": nil, "cancel": {"1"}, "retry": {"1"}, "enqueue": {"--agent", "a"}, "lane set": {"l"},
		"lane list": nil, "logs": {"1"}, "migrate": nil, "prune": {"--older-than", "1d"}, "run": nil,
		"runs":    nil, // run-now asks for its daemon's socket first "heartbeat": {"1"}, "complete": {"1"}, "fail": {"1"},
		"abandon": {"1"}, "tasks": nil, "show": {"1"}, "ui": nil,
	}
	for _, c := range commands {
		a, ok := args[c.name]
		if !ok {
			continue
		}
		delete(args, c.name)
		var out, errb bytes.Buffer
		cmd := append(strings.Fields(c.name), append(a, "--db", "redis://x", "--config", "/nonexistent/qd.hcl")...)
		if c.name == "run" {
			cmd = []string{"run", "--db", "redis://x"}
		}
		code := Main(context.Background(), cmd, strings.NewReader(""), &out, &errb)
		if got := lastLine(errb.String()); code != ExitFailure || got != want {
			t.Errorf("qd %s: exit %d, last line %q; want exit 1 and %q", strings.Join(cmd, " "), code, got, want)
		}
	}
	for name := range args {
		t.Errorf("no command %q to try", name)
	}
}

// lastLine is the last line of s, with its newline.
func lastLine(s string) string {
	lines := strings.SplitAfter(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1] + "\n"
}

// Ensure every command's --help exits 0 and lists each flag with a default.
func TestMain_Help(t *testing.T) {
	for _, c := range commands {
		var out, errb bytes.Buffer
		args := append(strings.Fields(c.name), "--help")
		if code := Main(context.Background(), args, nil, &out, &errb); code != 0 {
			t.Errorf("qd %s --help: exit %d, stderr %q", c.name, code, errb.String())
		}
		fs := newFlagSet(c, &Env{})
		c.setup(fs)
		fs.VisitAll(func(f *flag.Flag) {
			line := lineWith(out.String(), "  --"+f.Name+" ")
			if line == "" || !strings.Contains(line, "default") && !strings.Contains(line, "(required)") {
				t.Errorf("qd %s --help: flag --%s missing or without default:\n%s", c.name, f.Name, out.String())
			}
		})
	}
	var out bytes.Buffer
	if code := Main(context.Background(), []string{"help"}, nil, &out, &out); code != 0 {
		t.Fatalf("qd help: exit %d", code)
	}
	for _, c := range commands {
		if lineWith(out.String(), "  "+c.name+" ") == "" {
			t.Errorf("qd help does not list %q", c.name)
		}
	}
}

func lineWith(text, sub string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l+" ", sub) {
			return l
		}
	}
	return ""
}
