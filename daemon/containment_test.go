package daemon

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease/memlease"
	"github.com/qd-run/qd/supervisor"
)

// Ensure qd status reports the containment in force: a cgroup per run
// where this host allows (as root here), process groups with the reason
// when cgroups are ruled out.
func TestDaemon_ContainmentInStatus(t *testing.T) {
	probe := supervisor.ProbeContainment()
	td := MustStart(t, memlease.New(), "contained", "", agent("a", "@every 1h", "/bin/true"))
	s := td.waitStatus("a snapshot", func(*api.Snapshot) bool { return true })
	c := s.Containment
	if c.Kind != probe.Kind {
		t.Fatalf("containment %+v, want kind %q as probed (%s)", c, probe.Kind, probe)
	}
	if c.Kind == supervisor.ContainCgroup && !strings.Contains(c.Cgroup, "/qd-contained/") {
		t.Errorf("cgroup %q does not name the daemon", c.Cgroup)
	}
	td.stop()

	t.Setenv(supervisor.NoCgroupEnv, "1")
	td = MustStart(t, memlease.New(), "grouped", "", agent("a", "@every 1h", "/bin/true"))
	c = td.waitStatus("a snapshot", func(*api.Snapshot) bool { return true }).Containment
	if c.Kind != supervisor.ContainProcessGroup || !strings.Contains(c.Reason, supervisor.NoCgroupEnv) || c.Cgroup != "" {
		t.Errorf("containment with %s set: %+v, want process group and why", supervisor.NoCgroupEnv, c)
	}
}

// Ensure a daemon refuses to start with an agent's memory_max it cannot
// apply, naming the agent and why, and refuses a reload that adds one.
func TestDaemon_LimitsRefused(t *testing.T) {
	probe := supervisor.ProbeContainment()
	if probe.Kind == supervisor.ContainCgroup && len(probe.Controllers) == 2 {
		t.Skip("this host can apply memory_max")
	}
	dir, err := os.MkdirTemp("", "qdd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "qd.hcl")
	body := "name = \"lim\"\nsocket = \"" + filepath.Join(dir, "qd.sock") + "\"\nstate_dir = \"" + filepath.Join(dir, "state") + "\"\n" +
		agent("capped", "@every 1h", "/bin/true")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	conf, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	conf.Agents[0].MemoryMax = 64 << 20 // as a config read elsewhere could have it
	err = Run(context.Background(), Options{Config: conf, Queue: backendOf(memlease.New()), Stderr: testWriter{t}, Version: "test"})
	if err == nil {
		t.Fatal("daemon started with a memory_max it cannot apply")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{`qd.hcl:4: agent "capped"`, "memory_max"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}

	td := MustStart(t, memlease.New(), "lim2", "", agent("a", "@every 1h", "/bin/true"))
	td.write("lim2", "agent \"a\" {\n  command = [\"/bin/true\"]\n  schedule = \"@every 1h\"\n  memory_max = \"64M\"\n}\n")
	td.sigs <- syscall.SIGHUP
	s := td.waitStatus("the reload error", func(s *api.Snapshot) bool { return s.ConfigError != "" })
	if !strings.Contains(s.ConfigError, `agent "a"`) || !strings.Contains(s.ConfigError, "memory_max") {
		t.Errorf("reload with memory_max: error %q, want it to name the agent and memory_max", s.ConfigError)
	}
}
