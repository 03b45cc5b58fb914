package model

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// checks are the model's runs: the correct model, which must verify, and
// the broken variants, each of which must give a counterexample. Every run
// has two daemons, two lanes (limits 1 and 2) and three tasks; each fault
// of the correct model is checked in a run of its own, since all of them
// at once do not fit in a minute.
var checks = []struct {
	name   string
	defs   []string
	broken bool
}{
	{"Claims", []string{"-DMAXRUNS=3", noCrash, noPause, noLogBlock, noLoss}, false},
	{"Pause", []string{"-DMAXRUNS=3", noCrash, noLogBlock, noLoss}, false},
	{"Crash", []string{"-DMAXRUNS=3", noPause, noLogBlock, noLoss}, false},
	{"BlockedLog", []string{"-DMAXRUNS=3", noCrash, noPause, noLoss}, false},
	{"LostReplies", []string{"-DMAXRUNS=3", noCrash, noPause, noLogBlock}, false},
	{"AllFaults", []string{"-DMAXRUNS=2"}, false},
	{"ReapNoLock", []string{"-DREAP_NO_LOCK", "-DMAXRUNS=3", noCrash, noPause, noLogBlock, noLoss}, true},
	{"CountBeforeLock", []string{"-DCOUNT_BEFORE_LOCK", "-DMAXRUNS=3", noCrash, noPause, noLogBlock, noLoss}, true},
	{"AbandonNoProof", []string{"-DABANDON_NO_PROOF", "-DMAXRUNS=3", noPause, noLogBlock, noLoss}, true},
	{"HeartbeatUnfenced", []string{"-DHEARTBEAT_UNFENCED", "-DMAXRUNS=3", noCrash, noPause, noLogBlock, noLoss}, true},
	{"LogBeforeKill", []string{"-DLOG_BEFORE_KILL", "-DMAXRUNS=3", noCrash, noPause, noLoss}, true},
	{"LateAny", []string{"-DLATE_ANY", "-DMAXRUNS=3", noCrash, noPause, noLogBlock, noLoss}, true},
}

const (
	noCrash    = "-DMAXCRASH=0"
	noPause    = "-DMAXPAUSE=0"
	noLogBlock = "-DMAXLOGBLOCK=0"
	noLoss     = "-DMAXLOSS=0"
)

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
			line := fmt.Sprintf("%-18s errors %s, states stored %9s, seconds %s", c.name, errs[1], states[1], elapsed(secs))
			t.Log(line)
			figure(t, line)
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

// figure appends line to the file named by QD_MODEL_FIGURES, which
// scripts/test.sh prints after the tests, as go test hides the log of a
// passing test.
func figure(tb testing.TB, line string) {
	path := os.Getenv("QD_MODEL_FIGURES")
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		tb.Errorf("model figures: %v", err)
		return
	}
	defer f.Close()
	fmt.Fprintln(f, line)
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
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
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
	run("cc", "-O2", "-DSAFETY", "-DNOBOUNDCHECK", "-o", "pan", "pan.c")
	return run("./pan", "-m100000", "-w25"), dir
}
