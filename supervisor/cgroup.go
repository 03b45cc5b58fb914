package supervisor

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// How a supervisor holds each run's processes together (Containment.Kind).
const (
	// ContainCgroup: each run has a cgroup of its own. Every process the
	// child starts stays in it, setsid or not, and is killed with it.
	ContainCgroup = "cgroup"
	// ContainProcessGroup: each run is a process group. A grandchild that
	// calls setsid leaves the group and outlives its run.
	ContainProcessGroup = "process group"
)

// NoCgroupEnv, set to any non-empty value, keeps a supervisor to process
// groups where it could use cgroups (for tests, and to rule cgroups out).
const NoCgroupEnv = "QD_NO_CGROUP"

// Containment says how a supervisor contains its runs.
type Containment struct {
	Kind string // ContainCgroup or ContainProcessGroup
	// Path is the cgroup (a directory of the cgroup2 file system) under
	// which each run gets its own, when Kind is ContainCgroup. For
	// ProbeContainment, the parent this process would use.
	Path string
	// Mount is where the cgroup2 file system is mounted.
	Mount string
	// Controllers are those of "cpu" and "memory" that a run's cgroup has:
	// cpu_max needs cpu, memory_max needs memory (memory also gives each
	// run its memory peak).
	Controllers []string
	// Reason says why runs are in process groups only (Kind is
	// ContainProcessGroup); for ContainCgroup, which controllers are
	// missing and why, if any.
	Reason string
	// Undecided (from ProbeContainment) says that a daemon started by a
	// service manager could have what this process has not: a cgroup
	// delegated to it.
	Undecided bool
}

// Limits bounds the resources of one run; zero fields bound nothing. They
// are applied where runs have cgroups with the controller; Check says
// whether they can be.
type Limits struct {
	MemoryMax int64   // bytes, memory.max
	CPUMax    float64 // CPUs, cpu.max
}

// Check reports whether lim can be applied to the runs of agent under c,
// and if not, why, naming the agent and the setting.
func (c Containment) Check(agent string, lim Limits) error {
	var need []string
	if lim.MemoryMax > 0 {
		need = append(need, "memory")
	}
	if lim.CPUMax > 0 {
		need = append(need, "cpu")
	}
	for _, ctl := range need {
		setting := ctl + "_max"
		if c.Kind != ContainCgroup {
			return fmt.Errorf("agent %q: %s needs runs in cgroups, and this host contains them by process group only (%s); remove %s or run qd where it can create cgroups (see docs/service.md)",
				agent, setting, c.Reason, setting)
		}
		if !slices.Contains(c.Controllers, ctl) {
			return fmt.Errorf("agent %q: %s controller not enabled in cgroup v2 at %s; %s needs it (see docs/service.md, or remove %s)",
				agent, ctl, c.Mount, setting, setting)
		}
	}
	return nil
}

// String describes c in one line, as the log and qd status give it.
func (c Containment) String() string {
	if c.Kind != ContainCgroup {
		return fmt.Sprintf("%s (%s)", ContainProcessGroup, c.Reason)
	}
	ctl := "no controllers"
	if len(c.Controllers) > 0 {
		ctl = "controllers " + strings.Join(c.Controllers, ", ")
	}
	return fmt.Sprintf("%s under %s, %s", ContainCgroup, c.Path, ctl)
}

// Containment says how this supervisor contains its runs.
func (s *Supervisor) Containment() Containment {
	if s.cg == nil {
		return Containment{Kind: ContainProcessGroup, Reason: s.cgReason}
	}
	return s.cg.containment()
}

// Usage is what a run's cgroup measured once it was empty; nil fields were
// not measured (no cgroup, or no controller for it).
type Usage struct {
	CPU        *time.Duration // user and system time of all its processes
	MemoryPeak *int64         // bytes
}

// contain gives c's run its cgroup, when the supervisor has cgroups. A run
// with limits that cannot be applied is refused; one without gets by with
// its process group when its cgroup cannot be made.
func (s *Supervisor) contain(c *child) error {
	if s.cg == nil {
		return s.Containment().Check(c.spec.Agent, c.spec.Limits)
	}
	g, err := s.cg.newRun(c.spec.Agent, c.spec.Limits)
	switch {
	case err == nil:
		gen := g.holder()
		c.mu.Lock() // status reads it while the run starts
		c.cg, c.cgGen = g, gen
		c.mu.Unlock()
	case c.spec.Limits != (Limits{}):
		return err
	default:
		c.log.Warn("run has no cgroup of its own; it is contained by its process group only", "error", err)
	}
	return nil
}

// spawnIn starts cmd in g, or as it is when g is nil; see runCgroup.spawn.
func spawnIn(g *runCgroup, cmd *exec.Cmd) (*exec.Cmd, error) {
	if g == nil {
		return cmd, spawn(cmd)
	}
	return g.spawn(cmd)
}
