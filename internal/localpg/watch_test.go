package localpg

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Ensure Died tells a server that went away from one that was stopped: no
// cluster, a running one, one stopped cleanly and one starting again are
// not dead; a killed postmaster, or a live one whose socket file was
// removed, is. Running gives the URL only while the server answers.
func TestCluster_Died(t *testing.T) {
	t.Parallel()
	c := MustCluster(t, MustDir(t), Options{})
	if c.Died() {
		t.Error("a cluster not made yet died")
	}
	if _, ok := c.Running(); ok {
		t.Error("a cluster not made yet runs")
	}
	r := MustStart(t, c)
	if c.Died() {
		t.Error("a running server died")
	}
	if url, ok := c.Running(); !ok || url != r.URL {
		t.Errorf("Running = %q, %v; want %q", url, ok, r.URL)
	}
	if _, err := c.Stop(context.Background(), Fast); err != nil {
		t.Fatal(err)
	}
	if c.Died() {
		t.Error("a server stopped with pg_ctl died")
	}
	if _, ok := c.Running(); ok {
		t.Error("a stopped server runs")
	}

	MustStart(t, c)
	pid := MustPID(t, c)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	if !c.Died() {
		t.Error("a postmaster killed with SIGKILL did not die")
	}
	MustStart(t, c)
	if c.Died() {
		t.Error("a server started again after a kill died")
	}

	pf, err := readPIDFile(c.dataDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(pf.socketDir, ".s.PGSQL.5432")); err != nil {
		t.Fatal(err)
	}
	if !c.Died() {
		t.Error("a server whose socket was removed did not die")
	}
}

// Ensure the server does not speak to the service manager of the process
// that starts it: a postgres built with systemd support sends READY=1 to
// $NOTIFY_SOCKET, which belongs to qd's unit.
func TestCluster_NoServiceNotify(t *testing.T) {
	dir := MustDir(t)
	sock := filepath.Join(dir, "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server may run as another user (as root, the cluster's is qd).
	if err := os.Chmod(sock, 0o777); err != nil {
		t.Fatal(err)
	}
	t.Setenv("NOTIFY_SOCKET", sock)
	c := MustCluster(t, dir, Options{})
	MustStart(t, c)
	if _, err := c.Stop(context.Background(), Fast); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	buf := make([]byte, 4096)
	if n, _, err := conn.ReadFromUnix(buf); err == nil {
		t.Errorf("the server sent %q to the service manager's socket", buf[:n])
	}
}

// Ensure Await sleeps while the server runs and returns soon after the
// postmaster is killed, so that a daemon can start it again at once
// without looking every few hundred milliseconds.
func TestCluster_Await(t *testing.T) {
	t.Parallel()
	c := MustCluster(t, MustDir(t), Options{})
	t0 := time.Now()
	c.Await(context.Background(), 100*time.Millisecond)
	if took := time.Since(t0); took < 90*time.Millisecond {
		t.Errorf("Await with no server returned after %s, want the 100ms given", took)
	}
	MustStart(t, c)
	pid := MustPID(t, c)
	returned := make(chan time.Time, 1)
	go func() {
		c.Await(context.Background(), time.Minute)
		returned <- time.Now()
	}()
	select {
	case <-returned:
		t.Fatal("Await returned while the server ran")
	case <-time.After(500 * time.Millisecond):
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-returned:
		if at.Sub(killed) > time.Second {
			t.Errorf("Await returned %s after the kill", at.Sub(killed))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Await did not return within 5s of the postmaster's death")
	}
	waitGone(t, pid)
	if !c.Died() {
		t.Error("Died is false after the kill")
	}
	ctx, cancel := context.WithCancel(context.Background())
	MustStart(t, c)
	go func() { time.Sleep(100 * time.Millisecond); cancel() }()
	t0 = time.Now()
	c.Await(ctx, time.Minute)
	if took := time.Since(t0); took > 2*time.Second {
		t.Errorf("Await returned %s after its context ended", took)
	}
}
