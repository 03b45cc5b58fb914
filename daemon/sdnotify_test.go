package daemon

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/qd-run/qd/lease/memlease"
)

// MustNotifySocket binds a unixgram socket standing in for systemd's and
// points NOTIFY_SOCKET at it for the test.
func MustNotifySocket(tb testing.TB) *net.UnixConn {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	tb.Setenv("NOTIFY_SOCKET", path)
	return conn
}

func readDatagram(tb testing.TB, conn *net.UnixConn) string {
	tb.Helper()
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		tb.Fatalf("read notification: %v", err)
	}
	return string(buf[:n])
}

func TestServiceManager_Send(t *testing.T) {
	// Ensure each call sends exactly the sd_notify assignment systemd
	// expects, one datagram each.
	conn := MustNotifySocket(t)
	var n serviceManager
	if !n.Enabled() {
		t.Fatal("Enabled() = false with NOTIFY_SOCKET set")
	}
	for _, tt := range []struct {
		name string
		send func() error
		want string
	}{
		{"Ready", n.Ready, "READY=1"},
		{"Stopping", n.Stopping, "STOPPING=1"},
		{"Watchdog", n.Watchdog, "WATCHDOG=1"},
		{"Status", func() error { return n.Status("3 runs; database unreachable") }, "STATUS=3 runs; database unreachable"},
		{"StatusNewline", func() error { return n.Status("bad\nREADY=1") }, "STATUS=bad READY=1"},
		{"ExtendTimeout", func() error { return n.ExtendTimeout(45 * time.Second) }, "EXTEND_TIMEOUT_USEC=45000000"},
	} {
		if err := tt.send(); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := readDatagram(t, conn); got != tt.want {
			t.Errorf("%s sent %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestServiceManager_Reloading(t *testing.T) {
	// Ensure RELOADING=1 carries MONOTONIC_USEC, as Type=notify-reload
	// requires.
	conn := MustNotifySocket(t)
	if err := (serviceManager{}).Reloading(); err != nil {
		t.Fatal(err)
	}
	got := readDatagram(t, conn)
	if !regexp.MustCompile(`^RELOADING=1\nMONOTONIC_USEC=[1-9][0-9]*\n$`).MatchString(got) {
		t.Fatalf("Reloading sent %q", got)
	}
}

func TestServiceManager_Unset(t *testing.T) {
	// Ensure that outside systemd every call is a silent no-op.
	t.Setenv("NOTIFY_SOCKET", "")
	os.Unsetenv("NOTIFY_SOCKET")
	var n serviceManager
	if n.Enabled() {
		t.Fatal("Enabled() = true without NOTIFY_SOCKET")
	}
	for _, f := range []func() error{n.Ready, n.Stopping, n.Reloading, n.Watchdog, func() error { return n.Status("x") }} {
		if err := f(); err != nil {
			t.Fatalf("got %v, want nil", err)
		}
	}
}

func TestServiceManager_Dead(t *testing.T) {
	// Ensure a NOTIFY_SOCKET nobody listens on is reported, not ignored.
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone.sock"))
	if err := (serviceManager{}).Ready(); err == nil {
		t.Fatal("Ready() = nil with nothing listening")
	}
}

func TestServiceManager_WatchdogInterval(t *testing.T) {
	me := strconv.Itoa(os.Getpid())
	for _, tt := range []struct {
		name      string
		usec, pid string
		want      time.Duration
		wantOK    bool
	}{
		{"Unset", "", "", 0, false},
		{"OurPID", "30000000", me, 30 * time.Second, true},
		{"NoPID", "20000000", "", 20 * time.Second, true},
		{"OtherPID", "30000000", "1", 0, false},
		{"Garbage", "soon", "", 0, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Ensure the watchdog is only fed when systemd asked this
			// process for it.
			t.Setenv("WATCHDOG_USEC", tt.usec)
			t.Setenv("WATCHDOG_PID", tt.pid)
			got, ok := (serviceManager{}).WatchdogInterval()
			if got != tt.want || ok != tt.wantOK {
				t.Fatalf("WatchdogInterval() = %v, %v; want %v, %v", got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// Ensure an idle daemon (no runs, so its heartbeat loop sleeps) still
// feeds the service manager's watchdog well within its interval.
func TestDaemon_WatchdogFedWhileIdle(t *testing.T) {
	conn := MustNotifySocket(t)
	t.Setenv("WATCHDOG_USEC", "1000000")
	t.Setenv("WATCHDOG_PID", "")
	startWithServer(t, memlease.New(), "", nil)
	var last time.Time
	pings := 0
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
		if msg := readDatagram(t, conn); msg != "WATCHDOG=1" {
			continue
		}
		now := time.Now()
		if pings > 0 && now.Sub(last) > time.Second {
			t.Errorf("watchdog pings %s apart, longer than the 1s interval", now.Sub(last).Round(time.Millisecond))
		}
		last = now
		pings++
	}
	if pings < 3 {
		t.Errorf("%d watchdog pings in 3s, want one at least every half interval", pings)
	}
}
