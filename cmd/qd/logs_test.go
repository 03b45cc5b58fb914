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

// Ensure qd logs --follow of a running run that has written nothing yet
// (the daemon creates the log file with the first output) waits for the
// file, then follows it until the run ends.
func TestLogs_FollowFileAppearsLate(t *testing.T) {
	dir, env := MustClaimedRun(t)
	cmd := exec.Command("qd", "logs", "1", "--follow")
	cmd.Env = append(os.Environ(), env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond)
	if err := os.MkdirAll(dir+"/state/runs", 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := dir + "/state/runs/1.log"
	if err := os.WriteFile(logPath, []byte("first\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1200 * time.Millisecond)
	f, err := os.OpenFile(logPath, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("second\n")
	f.Close()
	MustQD(t, env, "complete", "1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("qd logs --follow: %v\n%s", err, errOut.String())
	}
	if got, want := out.String(), "first\nsecond\n"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if !strings.Contains(errOut.String(), "log file "+logPath) {
		t.Errorf("stderr %q does not say the log file is shown", errOut.String())
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
