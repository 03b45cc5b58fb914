package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

// A daemon says it still holds its name every nameEvery; one not heard from
// for nameStale loses it to the next daemon that asks.
const (
	nameEvery = 15 * time.Second
	nameStale = time.Minute
)

// firstClaimName claims the daemon's name at start. It fails only when
// another living daemon holds it; when the database cannot be reached the
// claim is left to keepName, and named is false.
func (d *daemon) firstClaimName(ctx context.Context) (named bool, err error) {
	if d.names == nil || d.dbError() != "" {
		return false, nil
	}
	var inUse *errNameInUse
	switch err := d.claimName(ctx); {
	case errors.As(err, &inUse):
		return false, err
	case err != nil:
		d.logger.Warn("could not record this daemon's name; will keep trying", "error", err)
		return false, nil
	}
	return true, nil
}

// errNameInUse: another living daemon holds this daemon's name.
type errNameInUse struct {
	holder lease.DaemonRecord
	config string
}

func (e *errNameInUse) Error() string {
	h := e.holder
	return fmt.Sprintf("supervisor name %q is in use by the qd daemon on host %s (pid %d, state_dir %s, socket %s, last seen %s ago): "+
		"give this daemon another `name` in %s, or stop the other one; see docs/service.md (two daemons on one host)",
		h.Name, h.Host, h.PID, h.StateDir, h.Socket, h.SeenAgo.Round(time.Second), e.config)
}

// me is this daemon's row in the daemons table.
func (d *daemon) me() lease.DaemonRecord {
	conf := d.config()
	host, _ := os.Hostname()
	boot, start := supervisor.Identity()
	return lease.DaemonRecord{Name: conf.Name, Instance: d.instance, Host: host, PID: os.Getpid(), BootID: boot,
		ProcStart: start, StateDir: conf.StateDir, Socket: conf.Socket, Version: d.version, Agents: agentNames(conf)}
}

// claimName records that this daemon holds its name. A holder is taken
// over only when it is proved gone: an earlier incarnation of this state
// directory, a process of this host that no longer runs, or a daemon not
// heard from for nameStale. Otherwise it returns *errNameInUse.
func (d *daemon) claimName(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	me := d.me()
	holder, ok, err := d.names.ClaimName(ctx, me, "", nameStale)
	if err == nil && !ok && d.gone(holder, me.Host) {
		holder, ok, err = d.names.ClaimName(ctx, me, holder.Instance, nameStale)
	}
	switch {
	case err != nil:
		return err
	case !ok:
		return &errNameInUse{holder: holder, config: d.config().Source()}
	}
	return nil
}

// gone reports whether the daemon that holds the name is proved gone.
func (d *daemon) gone(h lease.DaemonRecord, host string) bool {
	if slices.ContainsFunc(d.inc.earlier, func(e earlier) bool { return e.instance == h.Instance }) {
		return true
	}
	return h.Host == host && !supervisor.SameProcess(h.BootID, h.PID, h.ProcStart)
}

// keepName renews this daemon's hold on its name until ctx ends, claiming
// it again when the database lost it (a restored database, a takeover
// while this daemon could not reach it), and gives it up at the end.
func (d *daemon) keepName(ctx context.Context, claimed bool) {
	warned := false
	for {
		if claimed {
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			ok, err := d.names.TouchName(tctx, d.config().Name, d.instance, agentNames(d.config()))
			cancel()
			claimed = err != nil || ok
		}
		if !claimed {
			err := d.claimName(ctx)
			claimed = err == nil
			var inUse *errNameInUse
			if errors.As(err, &inUse) && !warned {
				d.logger.Error("another daemon holds this daemon's name; runs stay safe, but logs and status cannot tell the two apart", "error", err)
				warned = true
			}
		}
		if sleepCtx(ctx, nameEvery) != nil {
			break
		}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	_ = d.names.ReleaseName(ctx, d.config().Name, d.instance)
}

// agentNames lists the agents of conf.
func agentNames(conf *config.Config) []string {
	names := make([]string, len(conf.Agents))
	for i, a := range conf.Agents {
		names[i] = a.Name
	}
	return names
}
