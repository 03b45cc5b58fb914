package config

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

	"github.com/qd-run/qd/supervisor"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"1": 1, "512M": 512 << 20, "1.5G": 3 << 29, "64k": 64 << 10, "2T": 2 << 40} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "M", "0", "-1", "1MB", "ten"} {
		if _, err := ParseSize(in); err == nil {
			t.Errorf("ParseSize(%q) accepted", in)
		}
	}
}

// Ensure memory_max and cpu_max are read, and refused at their line, naming
// the agent and why, when this host could not apply them (as qd run --check
// and a daemon's start see it).
func TestLoad_LimitsOnThisHost(t *testing.T) {
	src := `agent "build" {
  command    = ["/bin/sh", "-c", "true"]
  schedule   = "@hourly"
  memory_max = "256M"
  cpu_max    = 1.5
}
`
	c := supervisor.ProbeContainment()
	cfg, err := Parse([]byte(src), "qd.hcl")
	switch {
	case c.Kind == supervisor.ContainCgroup && slices.Contains(c.Controllers, "memory") && slices.Contains(c.Controllers, "cpu"):
		if err != nil {
			t.Fatalf("limits refused where cgroups have both controllers: %v", err)
		}
		if a := cfg.Agents[0]; a.MemoryMax != 256<<20 || a.CPUMax != 1.5 {
			t.Errorf("limits read as %d bytes, %g CPUs", a.MemoryMax, a.CPUMax)
		}
	case err == nil:
		t.Fatalf("limits accepted with containment %s", c)
	case c.Kind == supervisor.ContainCgroup && !slices.Contains(c.Controllers, "memory"):
		want := `qd.hcl:4: agent "build": memory controller not enabled in cgroup v2 at ` + c.Mount + `; memory_max needs it`
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("refusal:\n%s\nwant it to start with:\n%s", err, want)
		}
	}
	t.Setenv(supervisor.NoCgroupEnv, "1")
	_, err = Parse([]byte(src), "qd.hcl")
	if err == nil || !strings.Contains(err.Error(), `qd.hcl:4: agent "build": memory_max needs runs in cgroups, and this host contains them by process group only (QD_NO_CGROUP is set)`) {
		t.Errorf("limits without cgroups: %v", err)
	}
	path := filepath.Join(t.TempDir(), "qd.hcl")
	MustWrite(t, path, src, 0o644)
	if _, err := LoadClient(path); err != nil {
		t.Errorf("a client's load refused the limits, which concern the daemon's host only: %v", err)
	}
}

// probeAsEnv makes the test binary parse the config file it names and
// print its problems and warnings, for TestLoad_LimitsUndecided.
const probeAsEnv = "QD_CONFIG_TEST_PARSE"

func TestMain(m *testing.M) {
	if path := os.Getenv(probeAsEnv); path != "" {
		c, err := Load(path)
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
func TestLoad_LimitsUndecided(t *testing.T) {
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Skip("needs root, to run the check as another user")
	}
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(dir, "config.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	MustWrite(t, bin, string(b), 0o755)
	path := filepath.Join(dir, "qd.hcl")
	MustWrite(t, path, "agent \"build\" {\n  command    = [\"/bin/true\"]\n  schedule   = \"@hourly\"\n  memory_max = \"64M\"\n}\n", 0o644)
	cmd := exec.Command(bin)
	cmd.Env = []string{probeAsEnv + "=" + path, "PATH=/usr/bin:/bin"}
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
