package supervisor

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Ensure every run's child gets a token of its own in QD_RUN_TOKEN, which
// the agent's env cannot set, that RunOfToken names the run by it while the
// run lives and by no other string, and that the token names nothing once
// the run has ended.
func TestSupervisor_RunOfToken(t *testing.T) {
	h := MustHarness(t, nil)
	dir := t.TempDir()
	tokenOf := map[int64]string{}
	var runs []RunRef
	for _, name := range []string{"a", "b"} {
		out := filepath.Join(dir, name)
		l := h.start(`printf %s "$QD_RUN_TOKEN" > `+out+`.tmp; mv `+out+`.tmp `+out+`; exec sleep 300`, "{}",
			Spec{Env: map[string]string{TokenEnv: "spoofed"}})
		runs = append(runs, RunRef{RunID: l.RunID, TaskID: l.TaskID})
		tokenOf[l.RunID] = mustReadFile(t, out)
	}
	a, b := tokenOf[runs[0].RunID], tokenOf[runs[1].RunID]
	if a == "" || a == "spoofed" || a == b || len(a) < 26 {
		t.Fatalf("tokens %q and %q: want two distinct random ones, neither the agent env's", a, b)
	}
	for i, r := range runs {
		if got := h.s.RunOfToken(tokenOf[r.RunID]); got != r {
			t.Errorf("RunOfToken(token of run %d) = %+v, want %+v", r.RunID, got, runs[i])
		}
	}
	for _, bad := range []string{"", "spoofed", a[:len(a)-1], a + "x", strings.ToLower(a)} {
		if got := h.s.RunOfToken(bad); got != (RunRef{}) {
			t.Errorf("RunOfToken(%q) = %+v, want none", bad, got)
		}
	}
	h.s.CancelTask(runs[0].TaskID)
	h.waitRun(runs[0].RunID)
	deadline := time.Now().Add(30 * time.Second)
	for h.s.RunOfToken(a) != (RunRef{}) {
		if time.Now().After(deadline) {
			t.Fatalf("the token of run %d still names it after the run ended", runs[0].RunID)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := h.s.RunOfToken(b); got != runs[1] {
		t.Errorf("RunOfToken(token of the live run) = %+v after the other ended, want %+v", got, runs[1])
	}
	h.s.CancelTask(runs[1].TaskID)
	h.waitRun(runs[1].RunID)
}

// Ensure RunOfProcess names the run of a process in its child's process
// group and, where runs have cgroups, of one that left the group with
// setsid; names none for a process of no run; and says ErrNoProcess for a
// pid that is gone.
func TestSupervisor_RunOfProcess(t *testing.T) {
	h := MustHarness(t, nil)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	grandFile := filepath.Join(dir, "grand")
	grandScript := MustScript(t, "echo $$ > "+grandFile+".tmp; mv "+grandFile+".tmp "+grandFile+"; exec sleep 300")
	l := h.start("echo $$ > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"\n"+
		"sh -c 'setsid "+grandScript+" </dev/null >/dev/null 2>&1 &'\nsleep 300", "{}", Spec{KillGrace: time.Second})
	want := RunRef{RunID: l.RunID, TaskID: l.TaskID}
	child, grand := MustReadPID(t, pidFile), MustReadPID(t, grandFile)
	if got, err := h.s.RunOfProcess(child); got != want || err != nil {
		t.Errorf("RunOfProcess(child %d) = %+v, %v; want %+v", child, got, err, want)
	}
	if got, err := h.s.RunOfProcess(os.Getpid()); got != (RunRef{}) || err != nil {
		t.Errorf("RunOfProcess(the supervisor's own pid) = %+v, %v; want none", got, err)
	}
	if _, err := h.s.RunOfProcess(1 << 30); !errors.Is(err, ErrNoProcess) {
		t.Errorf("RunOfProcess(a pid that is not there) = %v, want ErrNoProcess", err)
	}
	got, err := h.s.RunOfProcess(grand)
	defer func() {
		h.s.CancelTask(l.TaskID)
		h.waitRun(l.RunID)
	}()
	if h.s.Containment().Kind != ContainCgroup {
		if os.Getenv("CI") == "true" {
			t.Fatalf("runs not in cgroups under CI: %s", h.s.Containment().Reason)
		}
		t.Skipf("runs not in cgroups here (%s): a setsid grandchild is no run's", h.s.Containment().Reason)
	}
	if got != want || err != nil {
		t.Errorf("RunOfProcess(setsid grandchild %d) = %+v, %v; want %+v, by its cgroup", grand, got, err, want)
	}
}

func mustReadFile(tb testing.TB, path string) string {
	tb.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return string(b)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not written within 30s: %v", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
