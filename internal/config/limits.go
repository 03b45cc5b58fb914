package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/supervisor"
)

// maxCPUs bounds cpu_max: more CPUs than any host has is a typo.
const maxCPUs = 4096

// limits decodes memory_max and cpu_max. With host checks it also asks
// whether this host can apply them: a daemon started here would refuse
// them otherwise.
func (d *decoder) limits(attrs hcl.Attributes, ctx string, a *Agent) {
	var mem string
	if d.str(attrs, "memory_max", &mem) {
		n, err := ParseSize(mem)
		if err != nil {
			d.at(line(attrs["memory_max"]), ctx, "memory_max %q %v", mem, err)
		} else {
			a.MemoryMax = n
		}
	}
	if d.decode(attrs, "cpu_max", &a.CPUMax) && (a.CPUMax <= 0 || a.CPUMax > maxCPUs) {
		d.at(line(attrs["cpu_max"]), ctx, "cpu_max is a number of CPUs, more than 0 and at most %d (such as 0.5 or 2), got %g", maxCPUs, a.CPUMax)
		a.CPUMax = 0
	}
	if !d.hostChecks || (a.MemoryMax == 0 && a.CPUMax == 0) {
		return
	}
	lim := a.Limits()
	probe := supervisor.ProbeContainment()
	if err := probe.Check(a.Name, lim); err != nil {
		name := "memory_max"
		if lim.MemoryMax == 0 || (a.CPUMax > 0 && strings.Contains(err.Error(), "cpu_max")) {
			name = "cpu_max"
		}
		if probe.Undecided {
			// A service manager may delegate a cgroup to the daemon that
			// this process (qd run --check as another user) lacks: the
			// daemon decides at start.
			d.warns = append(d.warns, Problem{File: d.file, Line: line(attrs[name]),
				Message: fmt.Sprintf("%v; a daemon started here the same way would refuse it, one whose service delegates a cgroup to it (Delegate=yes) would not", err)})
			return
		}
		// The error names the agent already.
		_, msg, _ := strings.Cut(err.Error(), ": ")
		d.at(line(attrs[name]), ctx, "%s", msg)
	}
}

// Limits is what the agent's runs' cgroups are bounded by.
func (a *Agent) Limits() supervisor.Limits {
	return supervisor.Limits{MemoryMax: a.MemoryMax, CPUMax: a.CPUMax}
}

// ParseSize reads a size in bytes: a number, or a number with a suffix K,
// M, G or T (powers of 1024, as cgroups read them), such as "512M".
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	if t != "" {
		switch strings.ToUpper(t[len(t)-1:]) {
		case "K":
			mult = 1 << 10
		case "M":
			mult = 1 << 20
		case "G":
			mult = 1 << 30
		case "T":
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n <= 0 || n*float64(mult) >= 1<<62 {
		return 0, fmt.Errorf("is not a size: write a positive number of bytes, or one with a unit K, M, G or T (powers of 1024), such as \"512M\"")
	}
	return int64(n * float64(mult)), nil
}
