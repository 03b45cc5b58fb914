package daemon

import (
	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/supervisor"
)

// HostOf is what a host whose runs are contained as c can do, for
// config.Config.CheckHost: bind a socket at a path the platform takes, and
// apply the cgroup limits c has the controllers for. The daemon checks its
// config against its supervisor's containment; `qd run --check` against a
// probe of what a daemon started now would have.
func HostOf(c supervisor.Containment) config.Host {
	return config.Host{
		SocketPath: api.CheckSocketPath,
		Limit: func(a *config.Agent, setting string) (bool, error) {
			var lim supervisor.Limits
			switch setting {
			case "memory_max":
				lim.MemoryMax = a.MemoryMax
			case "cpu_max":
				lim.CPUMax = a.CPUMax
			}
			return c.Undecided, c.Check(a.Name, lim)
		},
	}
}

// limitsOf are the limits of a's runs' cgroups.
func limitsOf(a *config.Agent) supervisor.Limits {
	return supervisor.Limits{MemoryMax: a.MemoryMax, CPUMax: a.CPUMax}
}
