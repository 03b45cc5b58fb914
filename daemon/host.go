package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/box"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/supervisor"
)

// HostOf is what a host whose runs are contained as c can do, for
// config.Config.CheckHost: bind a socket at a path the platform takes,
// apply the cgroup limits c has the controllers for, run agents as the
// users this process may switch to, and make the boxes boxes says it can
// (asked only when the config has a sandbox block). The daemon checks its
// config against its supervisor's containment and boxes; `qd run --check`
// against a probe of what a daemon started now would have.
func HostOf(c supervisor.Containment, boxes func() box.Support) config.Host {
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
		Box: func(conf *config.Config, a *config.Agent, setting string) error {
			switch setting {
			case "user":
				return checkUser(conf, a)
			case "sandbox":
				return boxErr(a, boxes().Check(box.NetHost))
			case "network": // what a box needs at all is said at the block's line
				if boxes().Check(box.NetHost) != nil {
					return nil
				}
				return boxErr(a, boxes().Check(box.NetPorts))
			}
			return nil
		},
	}
}

func boxErr(a *config.Agent, err error) error {
	if err != nil {
		return fmt.Errorf("agent %q: sandbox: %w", a.Name, err)
	}
	return nil
}

// checkUser refuses a's user where this process could not start its runs
// as it: not root, and another user than its own, or a user who could not
// reach its runs' working directories and socket under the state
// directory.
func checkUser(conf *config.Config, a *config.Agent) error {
	u := a.User
	if !u.Known {
		return nil
	}
	if euid := os.Geteuid(); euid != 0 {
		if u.UID != euid || u.GID != os.Getegid() {
			return fmt.Errorf("agent %q: user %q (uid %d, gid %d): qd runs as uid %d, not root, and can start runs only as itself; run qd as root, or remove user",
				a.Name, u.Name, u.UID, u.GID, euid)
		}
		return nil
	}
	if u.UID == 0 {
		return nil
	}
	if err := api.CheckSocketPath(supervisor.RunsSocketPath(conf.StateDir)); err != nil {
		return fmt.Errorf("agent %q: user %q: its runs reach the daemon through a socket under the state directory, and %v", a.Name, u.Name, err)
	}
	if dir, mode, ok := reach(filepath.Dir(conf.StateDir), u); !ok {
		return fmt.Errorf("agent %q: user %q may not enter %s (mode %04o), on the way to the state directory %s where its runs work and reach the daemon; let others through it (chmod o+x %s) or move state_dir",
			a.Name, u.Name, dir, mode, conf.StateDir, dir)
	}
	return nil
}

// reach reports whether user u may search every directory from / to dir,
// by their mode bits; when not, stop is the first that stops it, with its
// mode. Directories not made yet are for the daemon to make.
func reach(dir string, u *config.User) (stop string, mode os.FileMode, ok bool) {
	var chain []string
	for d := dir; ; d = filepath.Dir(d) {
		chain = append(chain, d)
		if d == "/" || d == "." {
			break
		}
	}
	slices.Reverse(chain)
	for _, d := range chain {
		fi, err := os.Stat(d)
		if err != nil {
			return "", 0, true
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return "", 0, true
		}
		m := fi.Mode().Perm()
		var bit os.FileMode = 0o001
		switch {
		case int(st.Uid) == u.UID:
			bit = 0o100
		case int(st.Gid) == u.GID || slices.Contains(u.Groups, int(st.Gid)):
			bit = 0o010
		}
		if m&bit == 0 {
			return d, m, false
		}
	}
	return "", 0, true
}

// limitsOf are the limits of a's runs' cgroups.
func limitsOf(a *config.Agent) supervisor.Limits {
	return supervisor.Limits{MemoryMax: a.MemoryMax, CPUMax: a.CPUMax}
}
