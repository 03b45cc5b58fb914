package config

import "fmt"

// Host is what a config is checked against beyond its own text: what this
// host can do. Load asks the host nothing of the kind; Config.CheckHost
// applies a Host that the caller makes from what it knows (the daemon from
// its supervisor's containment, `qd run --check` from a probe of it, both
// with the platform's socket path limit). A nil func checks nothing.
type Host struct {
	// SocketPath refuses a socket path this platform cannot bind.
	SocketPath func(path string) error
	// Limit refuses setting ("memory_max" or "cpu_max") of a's runs when
	// this host cannot apply it, naming the agent and the setting, and
	// saying why and what to do; CheckHost adds the line. warnOnly says
	// that a daemon started otherwise (by a service manager that delegates
	// a cgroup to it) might apply it, so the refusal is a warning only.
	Limit func(a *Agent, setting string) (warnOnly bool, err error)
	// Box refuses setting ("user", "sandbox" or "network") of a's runs
	// in c when this host cannot give it: a daemon that is not root and
	// a user other than its own, a kernel without what the sandbox needs,
	// a platform without sandboxes. CheckHost adds the line.
	Box func(c *Config, a *Agent, setting string) error
}

// CheckHost checks c against h, each refusal at the line of the setting
// it refuses, as Load reports its problems; what is only a warning is
// added to c.Warnings.
func (c *Config) CheckHost(h Host) error {
	ps := &problems{file: c.file}
	if h.SocketPath != nil {
		if err := h.SocketPath(c.Socket); err != nil {
			what := ""
			if c.socketLine == 0 {
				what = "the default socket (set socket to a shorter path): "
			}
			ps.at(max(c.socketLine, 1), "", "%s%v", what, err)
		}
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		for _, l := range a.boxSettings() {
			if h.Box == nil {
				break
			}
			if err := h.Box(c, a, l.name); err != nil {
				ps.at(l.line, "", "%v", err)
			}
		}
		for _, l := range a.limitSettings() {
			if h.Limit == nil {
				break
			}
			warnOnly, err := h.Limit(a, l.name)
			switch {
			case err == nil:
			case warnOnly:
				c.Warnings = append(c.Warnings, Problem{File: c.file, Line: l.line,
					Message: fmt.Sprintf("%v; a daemon started here the same way would refuse it, one whose service delegates a cgroup to it (Delegate=yes) would not", err)})
			default:
				ps.at(l.line, "", "%v", err)
			}
		}
	}
	return ps.err()
}

// setting is a setting of a block and its line.
type setting struct {
	name string
	line int
}

// limitSettings are the cgroup limits a sets, with their lines (the
// block's when a limit was not read from the file).
func (a *Agent) limitSettings() []setting {
	line := func(l int) int {
		if l == 0 {
			return a.DeclRange.Start.Line
		}
		return l
	}
	var out []setting
	if a.MemoryMax > 0 {
		out = append(out, setting{"memory_max", line(a.memoryLine)})
	}
	if a.CPUMax > 0 {
		out = append(out, setting{"cpu_max", line(a.cpuLine)})
	}
	return out
}

// boxSettings are the settings of a that the host may not be able to
// give, with their lines: user, the sandbox block, and its network when
// it lists ports.
func (a *Agent) boxSettings() []setting {
	var out []setting
	if a.User != nil {
		out = append(out, setting{"user", a.userLine})
	}
	if s := a.Sandbox; s != nil {
		out = append(out, setting{"sandbox", s.DeclRange.Start.Line})
		if s.Network == NetworkPorts {
			out = append(out, setting{"network", s.networkLine})
		}
	}
	return out
}
