package box_test

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/box"
)

// TestMain makes the test binary the shim too, as the qd binary is, and
// a tool the boxed scripts run: `dial ADDR` says whether a TCP
// connection to ADDR can be made.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case box.Arg:
			box.Main(os.Args[2:])
		case "dial":
			c, err := net.DialTimeout("tcp", os.Args[2], 2*time.Second)
			if err != nil {
				fmt.Println("dial:", err)
				os.Exit(1)
			}
			c.Close()
			fmt.Println("dial: ok")
			os.Exit(0)
		}
	}
	os.Exit(m.Run())
}

const nobody = 65534

// boxed is one run of a script in a box.
type boxed struct {
	out    string
	boxErr error // from the status pipe
	exit   int
}

// runBoxed runs script with /bin/sh in box s, as uid (-1: this process's
// own, else root switches to it), as the supervisor starts a run.
func runBoxed(t *testing.T, s box.Spec, uid int, script string) boxed {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	st, err := box.Prepare(cmd, s, "/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	gid := os.Getgid()
	if uid < 0 {
		uid = os.Getuid()
	} else {
		gid = uid
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}
	}
	box.Attr(cmd.SysProcAttr, s, os.Geteuid() == 0, uid, gid)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Start()
	st.Started()
	if err != nil {
		t.Fatalf("start the shim: %v", err)
	}
	r := boxed{boxErr: st.Wait(box.Wait)}
	err = cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	r.out = out.String()
	return r
}

// mustOpenDir makes a directory that anyone may enter, with file f in it.
func mustOpenDir(t *testing.T, parent, name string) string {
	t.Helper()
	dir := filepath.Join(parent, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o777)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("in "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// mustBase makes a directory outside /tmp (the box has a /tmp of its
// own) that anyone may enter.
func mustBase(t *testing.T) string {
	t.Helper()
	base, err := os.MkdirTemp("/var/tmp", "qd-box-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(base, 0o755)
	t.Cleanup(func() { os.RemoveAll(base) })
	return base
}

func mustRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run the child as another user")
	}
}

// Ensure Probe finds what this host can do: Landlock, and namespaces the
// shim builds a box in.
func TestProbe(t *testing.T) {
	s := box.Probe("/proc/self/exe")
	if s.Landlock < box.MinLandlock || !s.Namespaces || s.Reason != "" {
		t.Fatalf("Probe: %+v", s)
	}
	if err := s.Check(box.NetPorts); s.Landlock >= box.PortsLandlock && err != nil {
		t.Errorf("Check(ports) with ABI %d: %v", s.Landlock, err)
	}
}

// Ensure a boxed child, as the daemon's user and as another, reads what
// it is given and the system, writes only its writable paths and /tmp,
// sees nothing else of the host (not a directory it was not given, not
// the files beside its own, not the password hashes, not a file it is to
// be shown empty), and a grandchild in a session of its own is held to
// the same.
func TestShim_Files(t *testing.T) {
	for _, who := range []struct {
		name string
		uid  int
	}{{"Self", -1}, {"Nobody", nobody}} {
		t.Run(who.name, func(t *testing.T) {
			if who.uid >= 0 {
				mustRoot(t)
			}
			base := mustBase(t)
			ro, rw, secret := mustOpenDir(t, base, "ro"), mustOpenDir(t, base, "rw"), mustOpenDir(t, base, "secret")
			hidden := filepath.Join(ro, "hidden")
			mustWrite(t, hidden, "a secret\n")
			s := box.Spec{Read: []string{ro}, Write: []string{rw}, Hide: []string{hidden}, Net: box.NetHost, Dir: rw}
			check := filepath.Join(ro, "check.sh")
			mustWrite(t, check, `who=$1
try() { if sh -c "$1" 2>/dev/null; then echo "yes: $1"; else echo "no: $1"; fi; }
try "cat `+ro+`/f"
try "echo x > `+rw+`/new-$who"
try "echo x > /tmp/new-$who && cat /tmp/new-$who"
try "echo x > `+ro+`/new-$who"
try "cat `+secret+`/f"
try "ls `+base+` | grep -q secret"
try "echo x > `+base+`/beside-$who"
try "echo x > /etc/new-$who"
try "grep -q root /etc/shadow"
try "grep -q secret `+hidden+`"
`)
			r := runBoxed(t, s, who.uid, "sh "+check+" self; setsid -w sh "+check+" grandchild </dev/null; echo cwd $(pwd)")
			if r.boxErr != nil || r.exit != 0 {
				t.Fatalf("boxed script: box %v, exit %d:\n%s", r.boxErr, r.exit, r.out)
			}
			for _, want := range []string{"yes: cat " + ro + "/f", "yes: echo x > " + rw + "/new-", "yes: echo x > /tmp/new-",
				"no: echo x > " + ro + "/new-", "no: cat " + secret + "/f", "no: ls " + base + " | grep -q secret", "no: echo x > " + base + "/beside-",
				"no: echo x > /etc/new-", "no: grep -q root /etc/shadow", "no: grep -q secret " + hidden} {
				if n := strings.Count(r.out, want); n != 2 {
					t.Errorf("%q %d times in the output, want twice (the child and its grandchild):\n%s", want, n, r.out)
				}
			}
			if !strings.Contains(r.out, "cwd "+rw) {
				t.Errorf("the working directory is not %s:\n%s", rw, r.out)
			}
			for _, f := range []string{filepath.Join(rw, "new-self"), filepath.Join(rw, "new-grandchild")} {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("what the box wrote is not on the host: %v", err)
				}
			}
			for _, f := range []string{"/etc/new-self", "/tmp/new-self", filepath.Join(base, "beside-self"), filepath.Join(ro, "new-self")} {
				if _, err := os.Stat(f); err == nil {
					t.Errorf("%s is on the host", f)
					os.Remove(f)
				}
			}
		})
	}
}

func mustWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Ensure the network of a box: "none" reaches neither the database's port
// nor another on the host's loopback, but has its own; ports reach the
// ports listed alone; host reaches both.
func TestShim_Network(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	open := ln.Addr().(*net.TCPAddr).Port
	other, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	closed := other.Addr().(*net.TCPAddr).Port
	exe, _ := os.Executable()
	dial := func(port int) string { return fmt.Sprintf("%s dial 127.0.0.1:%d", exe, port) }
	for _, c := range []struct {
		name      string
		spec      box.Spec
		open, oth bool
	}{
		{"None", box.Spec{Net: box.NetNone}, false, false},
		{"Ports", box.Spec{Net: box.NetPorts, Ports: []uint16{uint16(open)}}, true, false},
		{"Host", box.Spec{Net: box.NetHost}, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.spec.Dir = "/"
			r := runBoxed(t, c.spec, -1, dial(open)+"; "+dial(closed)+"; cat /sys/class/net/lo/operstate 2>&1; ls /sys 2>&1 | head -1")
			if r.boxErr != nil {
				t.Fatalf("box: %v\n%s", r.boxErr, r.out)
			}
			lines := strings.Split(r.out, "\n")
			if len(lines) < 2 {
				t.Fatalf("output:\n%s", r.out)
			}
			if got := lines[0] == "dial: ok"; got != c.open {
				t.Errorf("connect to port %d (listed, or the open one): %q, want ok %v", open, lines[0], c.open)
			}
			if got := lines[1] == "dial: ok"; got != c.oth {
				t.Errorf("connect to another port %d: %q, want reached %v", closed, lines[1], c.oth)
			}
		})
	}
}

// Ensure a box the shim cannot make starts nothing: the error comes back
// on the status pipe and the program never runs.
func TestShim_Refuses(t *testing.T) {
	base := mustBase(t)
	marker := filepath.Join(base, "ran")
	s := box.Spec{Write: []string{base, filepath.Join(base, "missing")}, Net: box.NetHost, Dir: base}
	r := runBoxed(t, s, -1, "touch "+marker)
	var be *box.Error
	if !errors.As(r.boxErr, &be) || !strings.Contains(be.Error(), "missing") {
		t.Errorf("box error %v, want one naming the missing path", r.boxErr)
	}
	if r.exit != 125 {
		t.Errorf("exit %d, want 125", r.exit)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the program ran though its box could not be made")
	}
}

// Ensure a boxed child cannot reach the processes outside its box: it
// sees the process that started it in /proc, but not its environment
// (which holds a run's token) nor its root, and, where Landlock scopes
// signals (ABI 6), cannot signal it.
func TestShim_Processes(t *testing.T) {
	want := "cmdline-yes\ndone"
	if box.Probe("/proc/self/exe").Landlock < 6 {
		want = "cmdline-yes\nkill-yes\ndone"
	}
	r := runBoxed(t, box.Spec{Net: box.NetHost, Dir: "/"}, -1, `p=$(cut -d' ' -f4 /proc/$$/stat)
test -r /proc/$p/cmdline && echo cmdline-yes
cat /proc/$p/environ >/dev/null 2>&1 && echo environ-yes
ls /proc/$p/root/ >/dev/null 2>&1 && echo root-yes
kill -0 $p 2>/dev/null && echo kill-yes
echo done`)
	if r.boxErr != nil || strings.TrimSpace(r.out) != want {
		t.Errorf("box %v, output %q; want only the command line readable", r.boxErr, r.out)
	}
}
