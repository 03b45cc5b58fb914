//go:build !linux

package supervisor

import (
	"errors"
	"os/exec"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Cgroups are Linux's: elsewhere every run is a process group.

var errNoCgroups = errors.New("cgroups are Linux only")

// ProbeContainment says how a daemon started now would contain its runs.
func ProbeContainment() Containment {
	return Containment{Kind: ContainProcessGroup, Reason: errNoCgroups.Error()}
}

type cgroupTree struct{}

type runCgroup struct{}

// is is false: without cgroups no run has one.
func (*runCgroup) is(string) bool { return false }

func setupCgroups(string, hclog.Logger) (*cgroupTree, error) { return nil, errNoCgroups }

func (*cgroupTree) containment() Containment { return ProbeContainment() }

func (*cgroupTree) newRun(string, Limits) (*runCgroup, error) { return nil, errNoCgroups }

func (*cgroupTree) killLeftovers() int { return 0 }

func (*cgroupTree) close() {}

func (*runCgroup) spawn(cmd *exec.Cmd) (*exec.Cmd, error) { return cmd, spawn(cmd) }

func (*runCgroup) killIfFull() error { return nil }

func (*runCgroup) end(hclog.Logger) Usage { return Usage{} }

func (*cgroupTree) idleSlots() int { return 0 }

func (*cgroupTree) cgroupOf(int) string { return "" }

func (*runCgroup) holder() int { return 0 }

func (*runCgroup) liveCPU(int) *time.Duration { return nil }
