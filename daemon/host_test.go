package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/qd-run/qd/internal/box"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/supervisor"
)

const limitsSrc = `agent "build" {
  command    = ["/bin/sh", "-c", "true"]
  schedule   = "@hourly"
  memory_max = "256M"
  cpu_max    = 1.5
}
`

// checkOnThisHost is what `qd run --check` does with the config at path.
func checkOnThisHost(path string) (*config.Config, error) {
	c, err := config.Load(path)
	if err != nil {
		return nil, err
	}
	return c, c.CheckHost(HostOf(supervisor.ProbeContainment(), supervisor.ProbeBox))
}

// Ensure memory_max and cpu_max are refused at their line, naming the
// agent and why, when this host could not apply them (as qd run --check
// and a daemon's start see it), and taken where it can.
func TestHostOf_LimitsOnThisHost(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qd.hcl")
	if err := os.WriteFile(path, []byte(limitsSrc), 0o644); err != nil {
		t.Fatal(err)
	}
	c := supervisor.ProbeContainment()
	_, err := checkOnThisHost(path)
	switch {
	case c.Kind == supervisor.ContainCgroup && slices.Contains(c.Controllers, "memory") && slices.Contains(c.Controllers, "cpu"):
		if err != nil {
			t.Fatalf("limits refused where cgroups have both controllers: %v", err)
		}
	case err == nil:
		t.Fatalf("limits accepted with containment %s", c)
	case c.Kind == supervisor.ContainCgroup && !slices.Contains(c.Controllers, "memory"):
		want := path + `:4: agent "build": memory controller not enabled in cgroup v2 at ` + c.Mount + `; memory_max needs it`
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("refusal:\n%s\nwant it to start with:\n%s", err, want)
		}
	}
	t.Setenv(supervisor.NoCgroupEnv, "1")
	_, err = checkOnThisHost(path)
	if err == nil || !strings.Contains(err.Error(), path+`:4: agent "build": memory_max needs runs in cgroups, and this host contains them by process group only (QD_NO_CGROUP is set)`) {
		t.Errorf("limits without cgroups: %v", err)
	}
	if _, err := config.LoadClient(path); err != nil {
		t.Errorf("a client's load refused the limits, which concern the daemon's host only: %v", err)
	}
}

// Ensure a socket path longer than the platform binds is refused at its
// line, and the default socket named as such.
func TestHostOf_SocketPath(t *testing.T) {
	long := "/tmp/" + strings.Repeat("a", 98) + ".sock"
	path := filepath.Join(t.TempDir(), "qd.hcl")
	if err := os.WriteFile(path, []byte("name = \"x\"\nsocket = \""+long+"\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := checkOnThisHost(path)
	if want := path + ":2: socket path " + long + " is 108 bytes, but a unix socket path may have at most"; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("long socket: %v\nwant it to start with %s", err, want)
	}
}

// checkAsEnv makes the test binary check the config file it names as qd
// run --check does and print its problems and warnings, for
// TestHostOf_LimitsUndecided.
const checkAsEnv = "QD_DAEMON_TEST_CHECK"

func TestMain(m *testing.M) {
	if path := os.Getenv(checkAsEnv); path != "" {
		c, err := checkOnThisHost(path)
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(0)
		}
		for _, w := range c.Warnings {
			fmt.Println("warning:", w.String())
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Ensure that a check by a user who could not create cgroups (not root,
// none delegated: qd run --check by hand) warns of memory_max instead of
// refusing it, since the daemon's service may delegate it a cgroup.
func TestHostOf_LimitsUndecided(t *testing.T) {
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("needs root, to run the check as another user")
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "daemon.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "qd.hcl")
	if err := os.WriteFile(path, []byte("agent \"build\" {\n  command    = [\"/bin/true\"]\n  schedule   = \"@hourly\"\n  memory_max = \"64M\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = []string{checkAsEnv + "=" + path, "PATH=/usr/bin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check as nobody: %v\n%s", err, out)
	}
	got := string(out)
	if strings.Contains(got, "error:") || !strings.Contains(got, `warning: `+path+`:4: agent "build": memory_max needs runs in cgroups`) ||
		!strings.Contains(got, "Delegate=yes") {
		t.Errorf("check as nobody:\n%s\nwant a warning at memory_max's line, naming Delegate=yes, and no error", got)
	}
}

// Ensure a sandbox block is refused at its line where the host cannot make
// the box, saying what is missing and what to do: not Linux (macOS), a
// kernel without Landlock or the namespaces, network ports without
// Landlock's TCP rules (at network's line); and taken where it can.
func TestHostOf_Box(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "qd.hcl")
	src := "agent \"a\" {\n  command  = [\"/bin/true\"]\n  schedule = \"@hourly\"\n  sandbox {\n    network = [\"443\"]\n  }\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		support box.Support
		want    string
	}{
		{"Linux", box.Support{OS: "linux", Landlock: 7, Namespaces: true}, ""},
		{"MacOS", box.Support{OS: "darwin", Reason: "a sandbox needs Linux (Landlock and namespaces)"},
			`:4: agent "a": sandbox: this host cannot make the box: a sandbox needs Linux (Landlock and namespaces), and this is darwin; remove the sandbox block (see docs/sandbox.md)`},
		{"NoLandlock", box.Support{OS: "linux", Reason: "the kernel has no Landlock (it needs Linux 5.13 or later, with landlock in its lsm= boot list)"},
			`:4: agent "a": sandbox: this host cannot make the box: the kernel has no Landlock (it needs Linux 5.13 or later, with landlock in its lsm= boot list) (see docs/sandbox.md)`},
		{"OldLandlock", box.Support{OS: "linux", Landlock: 3, Namespaces: true},
			`:5: agent "a": sandbox: this host cannot make the box: network ports need Landlock ABI 4 (Linux 6.7) to restrict TCP, and this kernel has ABI 3; use network = "none" or "host", or a newer kernel (see docs/sandbox.md)`},
	} {
		t.Run(c.name, func(t *testing.T) {
			conf, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			err = conf.CheckHost(HostOf(supervisor.ProbeContainment(), func() box.Support { return c.support }))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("refused on a host that can make the box: %v", err)
			case c.want != "" && (err == nil || err.Error() != path+c.want):
				t.Errorf("got:\n%v\nwant:\n%s%s", err, path, c.want)
			}
		})
	}
}

// Ensure user is refused at its line when the user could not reach its
// runs' directories: a directory above the state directory it may not
// enter is named, with what to do.
func TestHostOf_UserReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to name another user")
	}
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody")
	}
	dir := t.TempDir()
	closed := filepath.Join(dir, "closed")
	if err := os.Mkdir(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	os.Chmod(filepath.Dir(dir), 0o755)
	path := filepath.Join(dir, "qd.hcl")
	src := "state_dir = \"closed/state\"\nagent \"a\" {\n  command  = [\"/bin/true\"]\n  schedule = \"@hourly\"\n  user     = \"nobody\"\n}\n"
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := checkOnThisHost(path)
	want := path + `:5: agent "a": user "nobody" may not enter ` + closed + ` (mode 0700), on the way to the state directory ` + closed + `/state where its runs work and reach the daemon; let others through it (chmod o+x ` + closed + `) or move state_dir`
	if err == nil || err.Error() != want {
		t.Errorf("got:\n%v\nwant:\n%s", err, want)
	}
	os.Chmod(closed, 0o711)
	if _, err := checkOnThisHost(path); err != nil {
		t.Errorf("refused once the user may pass: %v", err)
	}
}
