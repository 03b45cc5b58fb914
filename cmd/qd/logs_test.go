package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure qd logs --follow prints what the daemon appends to the run's log
// file and returns once the run has ended, with a line saying how.
func TestLogs_Follow(t *testing.T) {
	dir, env := MustClaimedRun(t)
	logPath := MustRunLog(t, dir, "first\n")
	f := startFollow(t, env)
	time.Sleep(700 * time.Millisecond)
	MustAppend(t, logPath, "second\n")
	if got, want := f.mustEnd(t, env), "first\nsecond\n==> run 1 ended: completed; task 1 done <==\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// Ensure qd logs --follow of a running run that has written nothing yet
// (the daemon creates the log file with the first output) waits for the
// file, then follows it until the run ends.
func TestLogs_FollowFileAppearsLate(t *testing.T) {
	dir, env := MustClaimedRun(t)
	f := startFollow(t, env)
	time.Sleep(700 * time.Millisecond)
	logPath := MustRunLog(t, dir, "first\n")
	time.Sleep(1200 * time.Millisecond)
	MustAppend(t, logPath, "second\n")
	if got, want := f.mustEnd(t, env), "first\nsecond\n==> run 1 ended: completed; task 1 done <==\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.Contains(f.stderr.String(), "log file "+logPath) {
		t.Errorf("stderr %q does not say the log file is shown", f.stderr.String())
	}
}

// follow is `qd logs 1 --follow` running.
type follow struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func startFollow(t *testing.T, env []string) *follow {
	t.Helper()
	f := &follow{cmd: exec.Command("qd", "logs", "1", "--follow")}
	f.cmd.Env = append(os.Environ(), env...)
	f.cmd.Stdout, f.cmd.Stderr = &f.stdout, &f.stderr
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return f
}

// mustEnd completes run 1 and returns what qd logs printed once it has
// exited.
func (f *follow) mustEnd(t *testing.T, env []string) string {
	t.Helper()
	MustQD(t, env, "complete", "1")
	if err := f.cmd.Wait(); err != nil {
		t.Fatalf("qd logs --follow: %v\n%s", err, f.stderr.String())
	}
	return f.stdout.String()
}

// MustRunLog writes run 1's log file in the state directory under dir and
// returns its path.
func MustRunLog(t *testing.T, dir, text string) string {
	t.Helper()
	if err := os.MkdirAll(dir+"/state/runs", 0o755); err != nil {
		t.Fatal(err)
	}
	path := dir + "/state/runs/1.log"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// MustAppend appends text to the file at path.
func MustAppend(t *testing.T, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(text); err != nil {
		t.Fatal(err)
	}
}

// MustClaimedRun gives a fresh schema holding one claimed run (run 1) and
// a config whose state_dir is under the returned directory; env holds the
// variables that point qd at both.
func MustClaimedRun(t *testing.T) (string, []string) {
	t.Helper()
	u, _ := testkit.MustSchema(t)
	dir := t.TempDir()
	conf := dir + "/qd.hcl"
	if err := os.WriteFile(conf, []byte("state_dir = \""+dir+"/state\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"QD_DATABASE_URL=" + u, "QD_CONFIG=" + conf}
	MustQD(t, env, "migrate")
	MustQD(t, env, "enqueue", "--agent", "a")
	MustQD(t, env, "claim")
	return dir, env
}
