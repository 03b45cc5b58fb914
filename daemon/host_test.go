package daemon

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"

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
	return c, c.CheckHost(HostOf(supervisor.ProbeContainment()))
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
