package e2e

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
)

// MustPTY opens a pseudo-terminal and returns its master and slave ends,
// closed when the test ends.
func MustPTY(tb testing.TB) (master, slave *os.File) {
	tb.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		tb.Skipf("no pseudo-terminals here: %v", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		tb.Fatalf("unlock pty: %v", err)
	}
	n, err := unix.IoctlGetUint32(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		tb.Fatalf("pty number: %v", err)
	}
	s, err := os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		tb.Fatalf("open pty slave: %v", err)
	}
	tb.Cleanup(func() { s.Close(); m.Close() })
	return m, s
}

// onTerminal runs qd with args on a fresh terminal (stdout and stderr) and
// returns what the terminal received.
func onTerminal(t *testing.T, qd, db string, env []string, args ...string) string {
	t.Helper()
	master, slave := MustPTY(t)
	cmd := exec.Command(qd, args...)
	cmd.Env = append(append(testkit.Environ(), "QD_DATABASE_URL="+db), env...)
	cmd.Stdout, cmd.Stderr = slave, slave
	var got bytes.Buffer
	read := make(chan struct{})
	go func() { io.Copy(&got, master); close(read) }() // ends with EIO once the slave is closed
	if err := cmd.Run(); err != nil {
		t.Logf("qd %s: %v", strings.Join(args, " "), err)
	}
	slave.Close()
	select {
	case <-read:
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	return got.String()
}

// Ensure terminal escapes an agent prints (a window title, a clear screen,
// a carriage return that would write over a line) reach no operator's
// terminal through qd tasks, qd show, qd status or qd logs: each arrives
// as visible text, and only qd logs --raw passes the bytes on.
func TestTerminal_AgentEscapes(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := testkit.MustShortDir(t, "qd-term-")
	hostile := "\x1b]0;pwned\x07\x1b[2J\rall good"
	agent := filepath.Join(dir, "hostile.sh")
	writeFile(t, agent, "#!/bin/sh\nprintf '\\033]0;pwned\\007\\033[2J\\rall good\\n' >&2\nexit 1\n")
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	d := testkit.StartDaemon(t, qd, db, "term", `agent "hostile" {
  command = ["`+agent+`"]
  schedule = "@every 1s"
}`, testkit.DaemonOptions{})
	id := enqueue(t, qd, db, "term", "hostile", "--max-attempts", "1")
	waitShow(t, qd, db, id, 20*time.Second, "the task to fail", func(s shown) bool { return s.Task.State == "failed" })
	run := strconv.FormatInt(showTask(t, qd, db, id).Runs[0].ID, 10)
	for _, args := range [][]string{
		{"tasks", "--state", "failed"},
		{"show", id},
		{"runs", "--task", id},
		{"status", "--socket", d.Socket},
		{"logs", run},
	} {
		out := onTerminal(t, qd, db, nil, args...)
		if strings.ContainsAny(out, "\x1b\x07") || strings.Contains(out, "\rall good") {
			t.Errorf("qd %s passed the agent's control characters to the terminal:\n%q", args[0], out)
		}
		if !strings.Contains(out, `\x1b]0;pwned\x07\x1b[2J\rall good`) {
			t.Errorf("qd %s does not show the agent's text as escapes:\n%q", args[0], out)
		}
	}
	if out := onTerminal(t, qd, db, nil, "logs", "--raw", run); !strings.Contains(out, hostile) {
		t.Errorf("qd logs --raw on a terminal did not pass the bytes on:\n%q", out)
	}
}

// Ensure a listing on a terminal says on stderr which queue it reads and
// where that came from: the URL given (password hidden) by
// $QD_DATABASE_URL, by --db or by the config's database, or the private
// cluster the config's state_dir puts it in; and that JSON output, for
// scripts, says nothing of it.
func TestTerminal_ListingsNameTheirQueue(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	work := mustQuickstartDir(t, -1, -1)
	withDB := filepath.Join(work, "db.hcl")
	writeFile(t, withDB, "database = \""+db+"\"\n")
	private := filepath.Join(work, "qd.hcl")
	writeFile(t, private, "state_dir = \"state\"\n")
	testkit.MustQD(t, qd, "", "db", "start", "--config", private)
	redacted := lease.Redact(db)
	for _, c := range []struct {
		db   string
		args []string
		want string
	}{
		{db, []string{"tasks"}, "queue: " + redacted + " (from $QD_DATABASE_URL)\n"},
		{"", []string{"runs", "--db", db}, "queue: " + redacted + " (from --db)\n"},
		{"", []string{"lane", "list", "--config", withDB}, "queue: " + redacted + " (from database in " + withDB + ")\n"},
		{"", []string{"tasks", "--config", private}, "queue: private cluster in " + work + "/state/pg (from " + private + ")\n"},
	} {
		out := onTerminal(t, qd, c.db, nil, c.args...)
		if !strings.Contains(strings.ReplaceAll(out, "\r\n", "\n"), c.want) {
			t.Errorf("qd %s on a terminal does not say %q:\n%s", strings.Join(c.args, " "), c.want, out)
		}
	}
	if out := onTerminal(t, qd, db, nil, "tasks", "--json"); strings.Contains(out, "queue:") {
		t.Errorf("qd tasks --json names its queue:\n%s", out)
	}
}
