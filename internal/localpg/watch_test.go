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
