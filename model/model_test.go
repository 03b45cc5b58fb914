package model

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// checks are the model's runs: the correct model, which must verify, and
// the broken variants, each of which must give a counterexample.
var checks = []struct {
	name   string
	defs   []string
	broken bool
}{
	{"CorrectWithPause", []string{"-DLEASE=2", "-DMAXT=2", "-DMAXRUNS=2", "-DMAXCRASH=0"}, false},
	{"CorrectWithCrash", []string{"-DLEASE=2", "-DMAXT=2", "-DMAXRUNS=2", "-DMAXPAUSE=0"}, false},
	{"ReapNoLock", []string{"-DREAP_NO_LOCK", "-DLEASE=2", "-DMAXT=2", "-DMAXRUNS=3", "-DMAXCRASH=0", "-DMAXPAUSE=0"}, true},
	{"CountBeforeLock", []string{"-DCOUNT_BEFORE_LOCK", "-DMAXT=1", "-DMAXCRASH=0", "-DMAXPAUSE=0"}, true},
	{"AbandonNoProof", []string{"-DABANDON_NO_PROOF"}, true},
	{"HeartbeatUnfenced", []string{"-DHEARTBEAT_UNFENCED"}, true},
}

var (
	statesRe = regexp.MustCompile(`(\d+) states, stored`)
	errorsRe = regexp.MustCompile(`errors: (\d+)`)
	timeRe   = regexp.MustCompile(`elapsed time ([0-9.e+]+) seconds`)
)

// Ensure the model verifies and each broken variant is caught.
func TestModel(t *testing.T) {
	MustTools(t)
	src, err := filepath.Abs("lease.pml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			out, dir := MustCheck(t, src, c.defs)
			errs := errorsRe.FindStringSubmatch(out)
			states := statesRe.FindStringSubmatch(out)
			secs := timeRe.FindStringSubmatch(out)
			if errs == nil || states == nil {
				t.Fatalf("no verdict:\n%s", out)
			}
			t.Logf("%s: errors %s, states stored %s, seconds %s", c.name, errs[1], states[1], elapsed(secs))
			_, trailErr := os.Stat(filepath.Join(dir, "lease.pml.trail"))
			switch {
			case c.broken && (errs[1] != "1" || trailErr != nil):
				t.Errorf("broken variant not caught: errors %s, trail: %v\n%s", errs[1], trailErr, out)
			case !c.broken && errs[1] != "0":
				t.Errorf("got errors %s, want 0\n%s", errs[1], out)
			}
		})
	}
}

func elapsed(m []string) string {
	if m == nil {
		return "?"
	}
	return m[1]
}

// MustTools skips, or under CI fails, when spin or cc is missing.
func MustTools(tb testing.TB) {
	tb.Helper()
	for _, tool := range []string{"spin", "cc"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				tb.Fatalf("%s is needed to check the model: %v", tool, err)
			}
			tb.Skipf("%s not found; the model is not checked", tool)
		}
	}
}

// MustCheck builds the verifier for src with defs in a temporary directory,
// runs it in safety mode and returns its output and the directory.
func MustCheck(tb testing.TB, src string, defs []string) (string, string) {
	tb.Helper()
	dir := tb.TempDir()
	b, err := os.ReadFile(src)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "lease.pml"), b, 0o644); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	run := func(name string, args ...string) string {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			tb.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return string(out)
	}
	run("spin", append(append([]string{}, defs...), "-a", "lease.pml")...)
	run("cc", "-O2", "-DSAFETY", "-DCOLLAPSE", "-o", "pan", "pan.c")
	return run("./pan", "-m100000", "-w24"), dir
}
