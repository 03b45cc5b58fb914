package localpg

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// MustPID returns the postmaster's pid from its postmaster.pid.
func MustPID(tb testing.TB, c *Cluster) int {
	tb.Helper()
	pf, err := readPIDFile(c.dataDir())
	if err != nil {
		tb.Fatal(err)
	}
	return pf.pid
}

// waitGone waits until no process pid exists.
func waitGone(tb testing.TB, pid int) {
	tb.Helper()
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			tb.Fatalf("process %d still there", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure a Start after the postmaster was killed with SIGKILL starts it
// again, once its orphaned children are gone, with the data committed
// before the kill.
func TestCluster_RestartAfterKill(t *testing.T) {
	t.Parallel()
	c := MustCluster(t, MustDir(t), Options{})
	r := MustStart(t, c)
	conn := MustConnect(t, r.URL)
	if _, err := conn.Exec(context.Background(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('here')"); err != nil {
		t.Fatal(err)
	}
	pid := MustPID(t, c)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	t0 := time.Now()
	again := MustStart(t, c)
	t.Logf("start after kill -9: %s", time.Since(t0).Round(time.Millisecond))
	if !again.Started || again.Created {
		t.Errorf("Start after kill -9 = %+v, want Started only", again)
	}
	if MustPID(t, c) == pid {
		t.Errorf("the postmaster is still pid %d", pid)
	}
	if got := MustQuery(t, MustConnect(t, again.URL), "SELECT v FROM kept"); got != "here" {
		t.Errorf("after kill -9 the table holds %q", got)
	}
}

// Ensure a postmaster.pid left by a reboot, whose pid now belongs to
// another program, is cleared, with the lock file beside the socket, and
// the server starts.
func TestCluster_StalePIDFile(t *testing.T) {
	t.Parallel()
	c := MustCluster(t, MustDir(t), Options{})
	MustStart(t, c)
	if _, err := c.Stop(context.Background(), Fast); err != nil {
		t.Fatal(err)
	}
	other := exec.Command("sleep", "60")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Process.Kill(); other.Wait() })
	pid := strconv.Itoa(other.Process.Pid)
	stale := strings.Join([]string{pid, c.dataDir(), "1000", strconv.Itoa(port), c.Dir(), "", "  1234  5678", "ready   ", ""}, "\n")
	for _, path := range []string{filepath.Join(c.dataDir(), "postmaster.pid"), socketPath(c.Dir()) + ".lock"} {
		if err := os.WriteFile(path, []byte(stale), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	r := MustStart(t, c)
	if !r.Started {
		t.Errorf("Start = %+v, want Started", r)
	}
	if got := MustPID(t, c); strconv.Itoa(got) == pid {
		t.Errorf("postmaster.pid still names the other program, %s", pid)
	}
	MustQuery(t, MustConnect(t, r.URL), "SELECT 1::text")
}

// Ensure a cluster made by root belongs to the system user qd, runs as
// that user, and that root reaches it as that role over the socket; and
// that a state directory closed to others is opened to it for passing
// through only.
func TestCluster_Root(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	t.Parallel()
	dir := MustDir(t)
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	c := MustCluster(t, state, Options{})
	r := MustStart(t, c)
	u, err := user.Lookup(SystemUser)
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{c.Dir(), c.dataDir(), filepath.Join(c.dataDir(), "qd.conf")} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)); got != u.Uid {
			t.Errorf("%s belongs to uid %s, want %s (%s)", path, got, u.Uid, SystemUser)
		}
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", MustPID(t, c)))
	if err == nil && !strings.Contains(string(status), "\nUid:\t"+u.Uid+"\t") {
		t.Errorf("the postmaster does not run as %s:\n%s", SystemUser, status)
	}
	if got := MustQuery(t, MustConnect(t, r.URL), "SELECT current_user"); got != SystemUser {
		t.Errorf("root connects as %q, want %q", got, SystemUser)
	}
	if fi, _ := os.Stat(state); fi.Mode().Perm() != 0o701 {
		t.Errorf("state directory mode %04o, want 0701", fi.Mode().Perm())
	}
}

// Ensure a cluster whose socket path would pass the platform's limit
// listens in a short private directory under /tmp, and works.
func TestCluster_LongStatePath(t *testing.T) {
	t.Parallel()
	dir := MustDir(t)
	long := filepath.Join(dir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	if err := os.MkdirAll(long, 0o711); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Dir(long), 0o711)
	c := MustCluster(t, long, Options{})
	sock := c.socketDir()
	t.Cleanup(func() { os.RemoveAll(sock) })
	if sock == c.Dir() || len(socketPath(sock)) > maxSocketPath {
		t.Fatalf("socket directory %s for %s", sock, c.Dir())
	}
	r := MustStart(t, c)
	if !strings.Contains(r.URL, "host="+sock+"&") {
		t.Errorf("URL %s does not name the socket directory %s", r.URL, sock)
	}
	if got := MustQuery(t, MustConnect(t, r.URL), "SHOW unix_socket_directories"); got != sock {
		t.Errorf("the server listens in %q, want %q", got, sock)
	}
	fi, err := os.Lstat(sock)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Errorf("socket directory %s: %v, %v", sock, fi.Mode(), err)
	}
}

// Ensure a Setup that fails is run again by the next Start, and not after
// it has succeeded once.
func TestCluster_Setup(t *testing.T) {
	t.Parallel()
	dir := MustDir(t)
	calls := 0
	fail := true
	setup := func(ctx context.Context, url string) error {
		calls++
		if fail {
			return errors.New("schema broken")
		}
		return nil
	}
	c := MustCluster(t, dir, Options{Setup: setup})
	if _, err := c.Start(context.Background()); err == nil || !strings.Contains(err.Error(), "schema broken") {
		t.Fatalf("Start with a failing Setup: %v", err)
	}
	fail = false
	for range 2 {
		MustStart(t, c)
	}
	if calls != 2 {
		t.Errorf("Setup ran %d times, want 2 (the failure, then once)", calls)
	}
}

// Ensure a machine without the binaries gets one error that says what to
// install or which URL to set, and that nothing is made.
func TestCluster_MissingBinaries(t *testing.T) {
	t.Parallel()
	dir := MustDir(t)
	empty := filepath.Join(dir, "bin")
	os.Mkdir(empty, 0o755)
	c := New(filepath.Join(dir, "pg"), Options{Getenv: fakeEnv("PATH", empty)})
	c.search.root = dir
	_, err := c.Start(context.Background())
	if !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("Start = %v, want ErrNotInstalled", err)
	}
	for _, want := range []string{"install", "QD_DATABASE_URL", "QD_PG_BINDIR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q: %v", want, err)
		}
	}
	if _, err := os.Stat(c.dataDir()); !os.IsNotExist(err) {
		t.Errorf("a data directory was made: %v", err)
	}
}

func fakeEnv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}
