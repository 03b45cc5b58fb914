package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// tableCounts fingerprints what qd has written: rows of every table.
func (r *rig) tableCounts() string {
	var s string
	r.scalar(&s, `SELECT (SELECT count(*) FROM {s}.tasks) || '/' || (SELECT count(*) FROM {s}.runs) || '/' ||
		(SELECT count(*) FROM {s}.lanes) || '/' || (SELECT count(*) FROM {s}.periodic)`)
	return s
}

// rejected records one bad-input case: rejected means it was refused with
// the wanted exit code and message, and wrote nothing.
func rejected(t *testing.T, name string, ok bool) {
	t.Helper()
	fig.fault("bad-input", 1)
	fig.add(func(f *figures) {
		f.badTotal++
		if ok {
			f.badRejected++
		}
	})
}

// Ensure every bad config is refused by `qd run --check` and by `qd run`
// with exit 2 and a message naming file:line, and that nothing is written.
func TestBadInput_Config(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	good := r.agent
	plain := filepath.Join(r.dir, "plain.sh")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	shebang := filepath.Join(r.dir, "shebang.sh")
	if err := os.WriteFile(shebang, []byte("#!/nonexistent/interpreter\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	agent := func(attrs string) string {
		return fmt.Sprintf("agent \"w\" {\n  command = [%q]\n  schedule = \"@every 1s\"\n%s\n}\n", good, attrs)
	}
	cases := []struct {
		name, body string
		line       int    // line of the problem in the file
		want       string // part of the message
	}{
		{"missing bracket", "agent \"w\" {\n  command = [\"x\"\n  schedule = \"@every 1s\"\n}\n", 3, ""},
		{"unknown key", agent("  paralel = 2"), 4, "paralel"},
		{"wrong type", agent("  parallel = \"two\""), 4, "parallel"},
		{"unterminated string", "agent \"w\" {\n  command = [\"x]\n}\n", 2, ""},
		{"binary file", "\x00\x01\x02\xff\xfe", 0, ""},
		{"duplicate agent", agent("") + agent(""), 6, "w"},
		{"parallel zero", agent("  parallel = 0"), 4, "parallel"},
		{"zero lease", agent("  lease = \"0s\""), 4, "lease"},
		{"negative lease", agent("  lease = \"-5s\""), 4, "lease"},
		{"negative kill_grace", agent("  kill_grace = \"-1s\""), 4, "kill_grace"},
		{"duration with an unknown unit", agent("  timeout = \"10 parsecs\""), 4, "timeout"},
		{"heartbeat too long", agent("  lease = \"10s\"\n  heartbeat = \"6s\""), 5, "heartbeat"},
		{"every 0s", "agent \"w\" {\n  command = [\"" + good + "\"]\n  schedule = \"@every 0s\"\n}\n", 3, "schedule"},
		{"every negative", "agent \"w\" {\n  command = [\"" + good + "\"]\n  schedule = \"@every -5m\"\n}\n", 3, ""},
		{"30 February", "agent \"w\" {\n  command = [\"" + good + "\"]\n  schedule = \"0 0 30 2 *\"\n}\n", 3, "never"},
		{"TZ=0 cron", "agent \"w\" {\n  command = [\"" + good + "\"]\n  schedule = \"TZ=0 * * * * *\"\n}\n", 3, ""},
		{"missing command", "agent \"w\" {\n  command = [\"/nonexistent/agent\"]\n  schedule = \"@every 1s\"\n}\n", 2, "/nonexistent/agent"},
		{"not executable", "agent \"w\" {\n  command = [\"" + plain + "\"]\n  schedule = \"@every 1s\"\n}\n", 2, "plain.sh"},
		{"bad shebang", "agent \"w\" {\n  command = [\"" + shebang + "\"]\n  schedule = \"@every 1s\"\n}\n", 2, "/nonexistent/interpreter"},
		{"directory command", "agent \"w\" {\n  command = [\"" + r.dir + "\"]\n  schedule = \"@every 1s\"\n}\n", 2, ""},
		{"lane name", agent("  lanes = [\"Bad Lane\"]"), 4, "Bad Lane"},
		{"lane traversal", agent("  lanes = [\"../etc\"]"), 4, "../etc"},
		{"agent name", "agent \"Bad\" {\n  command = [\"" + good + "\"]\n  schedule = \"@every 1s\"\n}\n", 1, "Bad"},
		{"LD_PRELOAD", agent("  env = { LD_PRELOAD = \"/tmp/x.so\" }"), 4, "LD_PRELOAD"},
		{"parallel past 32 bits", agent("  parallel = 2147483648"), 4, "between 1 and 100000"},
		{"lease of 10ms", agent("  lease = \"10ms\""), 4, "shorter than 1s"},
		{"env of 140 KB", agent("  env = { BIG = \"" + strings.Repeat("x", 140<<10) + "\" }"), 4, "longer than the 131071 bytes"},
		{"periodic payload with NUL", agent("") + "periodic \"p\" {\n  agent = \"w\"\n  schedule = \"@daily\"\n  payload = \"{\\\"s\\\": \\\"\\\\u0000\\\"}\"\n}\n", 9, "u0000"},
		{"periodic priority past 32 bits", agent("") + "periodic \"p\" {\n  agent = \"w\"\n  schedule = \"@daily\"\n  priority = 2147483648\n}\n", 9, "priority must be between"},
	}
	before := r.tableCounts()
	for i, c := range cases {
		path := filepath.Join(r.dir, fmt.Sprintf("bad%02d.hcl", i))
		if err := os.WriteFile(path, []byte(c.body), 0o600); err != nil {
			t.Fatal(err)
		}
		ok := true
		for _, args := range [][]string{{"run", "--check", "--config", path}, {"run", "--config", path}} {
			_, errOut, code := testkit.QDWithin(t, 20*time.Second, r.qd, r.url, args...) // a config taken as valid would run for good
			where := path + ":"
			if c.line > 0 {
				where = fmt.Sprintf("%s:%d", path, c.line)
			}
			switch {
			case code != 2:
				t.Errorf("%s: qd %s: exit %d, want 2: %s", c.name, args[1], code, errOut)
				ok = false
			case !strings.Contains(errOut, where) && !(c.line == 0 && strings.Contains(errOut, path)):
				t.Errorf("%s: message does not name %s:\n%s", c.name, where, errOut)
				ok = false
			case !strings.Contains(errOut, c.want):
				t.Errorf("%s: message does not mention %q:\n%s", c.name, c.want, errOut)
				ok = false
			case strings.Contains(errOut, "panic"):
				t.Errorf("%s: qd panicked:\n%s", c.name, errOut)
				ok = false
			}
		}
		rejected(t, c.name, ok)
	}
	if after := r.tableCounts(); after != before {
		t.Errorf("bad configs wrote to the database: rows %s before, %s after", before, after)
	}
}

// Ensure bad enqueues are refused with exit 2 and a clear message, and
// write nothing.
func TestBadInput_Enqueue(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	big := `{"x":"` + strings.Repeat("a", 1<<20) + `"}`
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"not JSON", "", []string{"--lane", "l", "--agent", "a", "{not json"}, "JSON"},
		{"truncated JSON", "", []string{"--lane", "l", "--agent", "a", `{"a":`}, "JSON"},
		{"payload over the cap", big, []string{"--lane", "l", "--agent", "a", "-"}, "bytes"},
		{"NUL escape", "", []string{"--lane", "l", "--agent", "a", `{"a":"\u0000"}`}, "0000"},
		{"nested 65 deep", "", []string{"--lane", "l", "--agent", "a", strings.Repeat("[", 65) + strings.Repeat("]", 65)}, "limit of 64"},
		{"nested 10000 deep", strings.Repeat("[", 10000) + strings.Repeat("]", 10000), []string{"--lane", "l", "--agent", "a", "-"}, "limit of 64"},
		{"nested past Go's limit", strings.Repeat("[{\"a\":", 6000) + "1" + strings.Repeat("}]", 6000), []string{"--lane", "l", "--agent", "a", "-"}, "limit of 64"},
		{"lane with space", "", []string{"--lane", "a b", "--agent", "a"}, "a b"},
		{"lane traversal", "", []string{"--lane", "../etc", "--agent", "a"}, "../etc"},
		{"lane upper case", "", []string{"--lane", "Ünicode", "--agent", "a"}, "lane"},
		{"lane too long", "", []string{"--lane", strings.Repeat("a", 300), "--agent", "a"}, "lane"},
		{"lane empty", "", []string{"--lane", "", "--agent", "a"}, "lane"},
		{"lane newline", "", []string{"--lane", "lane\n", "--agent", "a"}, "lane"},
		{"agent name", "", []string{"--lane", "l", "--agent", "A/B"}, "agent"},
		{"negative delay", "", []string{"--lane", "l", "--agent", "a", "--in", "-5s"}, "in"},
		{"max attempts zero", "", []string{"--lane", "l", "--agent", "a", "--max-attempts", "0"}, "max-attempts"},
		{"bad time", "", []string{"--lane", "l", "--agent", "a", "--at", "tomorrow"}, "RFC 3339"},
		{"priority past 32 bits", "", []string{"--lane", "l", "--agent", "a", "--priority", "2147483648"}, "--priority: must be at most 2147483647"},
		{"max attempts past 32 bits", "", []string{"--lane", "l", "--agent", "a", "--max-attempts", "2147483648"}, "--max-attempts: must be at most 2147483647"},
		{"key of 40 KB", "", []string{"--lane", "l", "--agent", "a", "--key", strings.Repeat("k", 40<<10)}, "--key: dedupe key is 40960 bytes, more than the 1024-byte limit"},
	}
	before := r.tableCounts()
	for _, c := range cases {
		_, errOut, code := testkit.QDStdin(t, r.qd, r.url, c.stdin, append([]string{"enqueue"}, c.args...)...)
		ok := code == 2 && strings.Contains(errOut, c.want) && !strings.Contains(errOut, "panic")
		if !ok {
			t.Errorf("%s: exit %d, want 2 with a message mentioning %q: %.300s", c.name, code, c.want, errOut)
		}
		rejected(t, c.name, ok)
	}
	if after := r.tableCounts(); after != before {
		t.Errorf("bad enqueues wrote to the database: rows %s before, %s after", before, after)
	}
}
