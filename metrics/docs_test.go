package metrics_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
	"github.com/qd-run/qd/metrics"
)

// Ensure docs/metrics.md lists every qd_ metric a daemon exposes, with its
// type, and nothing that does not exist.
func TestDocs_EveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	q := memlease.New()
	defer q.Close()
	if _, _, err := q.Enqueue(t.Context(), lease.EnqueueParams{Agent: "a"}); err != nil {
		t.Fatal(err)
	}
	burst, max := 0, 5.0
	if _, err := q.SetLimit(t.Context(), lease.LimitUpdate{Name: "api", Rate: 60, Per: time.Minute, Burst: &burst}); err != nil {
		t.Fatal(err)
	}
	if _, err := q.SetBudget(t.Context(), lease.BudgetUpdate{Name: "daily", Max: &max, Period: "1d"}); err != nil {
		t.Fatal(err)
	}
	m := metrics.New(metrics.Options{Queue: q, Children: func() map[string]int { return map[string]int{"a": 0} },
		Transactions: func() int64 { return 7 }})
	m.Claimed("a", 1, time.Millisecond, nil)
	m.RunStarted("a", "default", time.Second)
	m.RunEnded("a", "default", lease.RunAbandoned, "timeout", time.Second)
	m.Heartbeat(time.Millisecond, nil)
	m.LoopPass()
	m.Reloaded(true)
	s := MustScrape(t, m.Handler())

	row := regexp.MustCompile("(?m)^\\| `(qd_[a-z_]+)` \\| ([a-z]+) \\|")
	documented := map[string]string{}
	for _, r := range row.FindAllSubmatch(doc, -1) {
		documented[string(r[1])] = string(r[2])
	}
	for name, f := range s {
		if !strings.HasPrefix(name, "qd_") {
			continue
		}
		typ := strings.ToLower(f.GetType().String())
		switch got, ok := documented[name]; {
		case !ok:
			t.Errorf("docs/metrics.md does not list %s", name)
		case got != typ:
			t.Errorf("docs/metrics.md says %s is a %s; it is a %s", name, got, typ)
		}
	}
	for name := range documented {
		if _, ok := s[name]; !ok {
			t.Errorf("docs/metrics.md lists %s, which the daemon does not expose", name)
		}
	}
}

// Ensure the alert rules of docs/metrics.md are valid and fire when they
// should: on synthetic series in testdata/rules_test.yml, a stuck lane
// (and not a paused one), an agent failing half its runs, and a heartbeat
// loop that stopped. It needs promtool (Debian's prometheus package).
func TestDocs_AlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool is needed to check the alert rules (apt-get install prometheus)")
		}
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	doc, err := os.ReadFile("../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := bytes.Cut(doc, []byte("## Alert rules"))
	_, rest, ok := bytes.Cut(rest, []byte("```yaml\n"))
	rules, _, ok2 := bytes.Cut(rest, []byte("```"))
	if !ok || !ok2 {
		t.Fatal("docs/metrics.md has no yaml block under Alert rules")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yml"), rules, 0o600); err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile("testdata/rules_test.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "rules_test.yml"), tests, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"check", "rules", "rules.yml"}, {"test", "rules", "rules_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if n := bytes.Count(rules, []byte("- alert: ")); n != 3 {
		t.Errorf("%d alert rules in docs/metrics.md, want the three it describes", n)
	}
}
