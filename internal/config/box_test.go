package config

import (
	"errors"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const boxSrc = `agent "boxed" {
  command      = ["/bin/true"]
  schedule     = "@hourly"
  user         = "nobody"
  workdir      = "fresh"
  keep_workdir = "always"
  sandbox {
    read    = ["in", "~"]
    write   = ["out"]
    network = [443, "5432", "443"]
  }
}

agent "plain" {
  command  = ["/bin/true"]
  schedule = "@hourly"
  workdir  = "fresh"
  sandbox {
  }
}
`

// Ensure user, workdir and a sandbox block decode: the user and its ids
// from this host, workdir's keep defaulting to never, paths resolved
// against the file's directory, ports given as numbers or strings and
// listed once, and the network "host" by default.
func TestLoad_Box(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	dir := t.TempDir()
	for _, d := range []string{"in", "out"} {
		MustWrite(t, filepath.Join(dir, d, ".keep"), "", 0o644)
	}
	MustWrite(t, filepath.Join(dir, "qd.hcl"), boxSrc, 0o644)
	c := MustLoad(t, filepath.Join(dir, "qd.hcl"))
	a := c.Agent("boxed")
	uid, _ := strconv.Atoi(nobody.Uid)
	if u := a.User; u == nil || u.Name != "nobody" || u.UID != uid || u.Home != nobody.HomeDir || !u.Known {
		t.Errorf("user: %+v", a.User)
	}
	if a.Workdir != WorkdirFresh || a.KeepWorkdir != KeepAlways {
		t.Errorf("workdir %q keep %q", a.Workdir, a.KeepWorkdir)
	}
	home, _ := filepath.Abs(mustHome(t))
	s := a.Sandbox
	if s == nil || !slices.Equal(s.Read, []string{filepath.Join(dir, "in"), home}) || !slices.Equal(s.Write, []string{filepath.Join(dir, "out")}) ||
		s.Network != NetworkPorts || !slices.Equal(s.Ports, []uint16{443, 5432}) {
		t.Errorf("sandbox: %+v", s)
	}
	p := c.Agent("plain")
	if p.KeepWorkdir != KeepNever || p.Sandbox == nil || p.Sandbox.Network != NetworkHost || p.User != nil {
		t.Errorf("plain: keep %q, sandbox %+v, user %+v", p.KeepWorkdir, p.Sandbox, p.User)
	}
	client, err := LoadClient(filepath.Join(dir, "qd.hcl"))
	if err != nil || client.Agent("boxed").User.Known {
		t.Errorf("LoadClient: %v; it asks the host of no user", err)
	}
}

func mustHome(t *testing.T) string {
	t.Helper()
	u, err := user.Current()
	if err != nil {
		t.Skip(err)
	}
	return u.HomeDir
}

// Ensure CheckHost asks the host of each box setting and refuses each at
// its own line: user at user's, a sandbox at its block's, ports at
// network's.
func TestCheckHost_Box(t *testing.T) {
	if _, err := user.Lookup("nobody"); err != nil {
		t.Skip("no user nobody")
	}
	dir := t.TempDir()
	for _, d := range []string{"in", "out"} {
		MustWrite(t, filepath.Join(dir, d, ".keep"), "", 0o644)
	}
	path := filepath.Join(dir, "qd.hcl")
	MustWrite(t, path, boxSrc, 0o644)
	c := MustLoad(t, path)
	var asked []string
	err := c.CheckHost(Host{Box: func(conf *Config, a *Agent, setting string) error {
		asked = append(asked, a.Name+" "+setting)
		return errors.New("no " + setting + " here")
	}})
	want := []string{path + ":4: no user here", path + ":7: no sandbox here", path + ":10: no network here", path + ":18: no sandbox here"}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("CheckHost:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
	if got := strings.Join(asked, ", "); got != "boxed user, boxed sandbox, boxed network, plain sandbox" {
		t.Errorf("asked the host of %s", got)
	}
}
