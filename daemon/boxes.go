package daemon

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/box"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/supervisor"
)

// foreign reports whether a's runs run as another user than the daemon's:
// they reach the daemon through the runs' socket.
func foreign(a *config.Agent) bool {
	return a.User != nil && a.User.Known && a.User.UID != os.Geteuid()
}

// socketOf is the socket a's runs are given in $QD_SOCKET: the daemon's,
// or, for runs as another user, who may not connect to it, the runs'.
func socketOf(conf *config.Config, a *config.Agent) string {
	if foreign(a) {
		return supervisor.RunsSocketPath(conf.StateDir)
	}
	return conf.Socket
}

// credentialOf is who a's runs run as; nil for the daemon's own user.
func credentialOf(a *config.Agent) *supervisor.Credential {
	u := a.User
	if u == nil || !u.Known {
		return nil
	}
	return &supervisor.Credential{Name: u.Name, UID: u.UID, GID: u.GID, Groups: slices.Clone(u.Groups), Home: u.Home}
}

// boxOf is the box of a's runs; nil without a sandbox block. The
// daemon's config file is hidden in it, should a read path show it.
func boxOf(conf *config.Config, a *config.Agent) *box.Spec {
	s := a.Sandbox
	if s == nil {
		return nil
	}
	b := &box.Spec{Read: slices.Clone(s.Read), Write: slices.Clone(s.Write), Net: s.Network,
		Ports: slices.Clone(s.Ports), Socket: socketOf(conf, a)}
	if conf.Path != "" {
		b.Hide = []string{conf.Path}
	}
	return b
}

// boxStatus is what status shows of a's runs' user, workdir and box, with
// what the host makes the box of; nil for an agent without any.
func boxStatus(a *config.Agent, support func() box.Support) *api.BoxStatus {
	if a.User == nil && a.Workdir == "" && a.Sandbox == nil {
		return nil
	}
	st := &api.BoxStatus{}
	if u := a.User; u != nil {
		st.User = fmt.Sprintf("%s (uid %d, gid %d)", u.Name, u.UID, u.GID)
	}
	if a.Workdir != "" {
		st.Workdir = a.Workdir
		if a.KeepWorkdir != config.KeepNever {
			st.Workdir += ", kept: " + a.KeepWorkdir
		}
	}
	if s := a.Sandbox; s != nil {
		st.Sandbox = &api.SandboxStatus{Read: nonNil(s.Read), Write: nonNil(s.Write),
			Network: box.NetText(s.Network, s.Ports), Enforced: support().For(s.Network)}
	}
	return st
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// runsSocket is the socket of the runs of agents that run as another
// user (supervisor.RunsSocketPath), opened for the first such run and
// closed with the daemon's socket.
type runsSocket struct {
	mu  sync.Mutex
	srv *api.Server
}

// openRuns opens the runs' socket unless it is open.
func (d *daemon) openRuns() error {
	d.runs.mu.Lock()
	defer d.runs.mu.Unlock()
	if d.runs.srv != nil {
		return nil
	}
	state := d.config().StateDir
	if err := supervisor.OpenWorkDir(state, true); err != nil {
		return err
	}
	srv, err := api.ListenRuns(supervisor.RunsSocketPath(state), d, d.logger.Named("runs-socket"))
	if err != nil {
		return fmt.Errorf("open the socket of runs as another user: %w", err)
	}
	d.runs.srv = srv
	go func() {
		if err := srv.Serve(); err != nil {
			d.logger.Error("the socket of runs as another user stopped", "error", err)
		}
	}()
	return nil
}

// closeRuns closes the runs' socket, if open.
func (d *daemon) closeRuns() {
	d.runs.mu.Lock()
	srv := d.runs.srv
	d.runs.srv = nil
	d.runs.mu.Unlock()
	if srv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}
}
