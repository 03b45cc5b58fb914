package daemon

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/qd-run/qd/internal/config"
)

// reload reads the config file again. Agents and periodic schedules change
// at once, without touching running children; an invalid file is reported
// and the old config stays. Settings that need a restart are left as they
// were, with a warning.
func (d *daemon) reload() {
	_ = d.service.Reloading()
	defer func() { _ = d.service.Ready() }()
	old := d.config()
	if old.Path == "" {
		d.logger.Info("reload: no config file to read again")
		return
	}
	conf, err := config.Load(old.Path)
	if err == nil {
		err = conf.CheckHost(HostOf(d.sup.Containment(), d.sup.BoxSupport))
	}
	if err != nil {
		d.logger.Error("reload failed; keeping the running config", "error", err)
		d.mu.Lock()
		d.reloadErr = err.Error()
		d.mu.Unlock()
		d.metrics.Reloaded(false)
		line, _, _ := strings.Cut(err.Error(), "\n")
		_ = d.service.Status("reload failed: " + line)
		return
	}
	for _, k := range restartOnly(old, conf) {
		d.logger.Warn("reload: this setting changes only at restart", "setting", k)
	}
	conf.Database, conf.Name, conf.Socket, conf.StateDir = old.Database, old.Name, old.Socket, old.StateDir
	d.mu.Lock()
	d.conf, d.reloadErr = conf, ""
	d.mu.Unlock()
	d.sched.Set(schedulerAgents(conf), schedulerPeriodics(conf))
	d.wantLanes()
	d.sender.Kick() // a plan with routes now is polled from now on
	d.logWarnings(conf)
	d.logger.Info("config reloaded", "agents", len(conf.Agents), "periodics", len(conf.Periodics))
	d.metrics.Reloaded(true)
	_ = d.service.Status("running")
}

func restartOnly(old, conf *config.Config) []string {
	var out []string
	if old.Database != conf.Database {
		out = append(out, "database")
	}
	if old.Name != conf.Name {
		out = append(out, "name")
	}
	if old.Socket != conf.Socket {
		out = append(out, "socket")
	}
	if old.StateDir != conf.StateDir {
		out = append(out, "state_dir")
	}
	if (old.UI == nil) != (conf.UI == nil) || (old.UI != nil && !sameUI(*old.UI, *conf.UI)) {
		out = append(out, "ui")
	}
	return out
}

// sameUI compares two ui blocks, wherever in the file they are.
func sameUI(a, b config.UI) bool {
	a.DeclRange = b.DeclRange
	return reflect.DeepEqual(a, b)
}

// logWarnings logs what the config holds that is valid but likely a
// mistake (config.Config.Warnings).
func (d *daemon) logWarnings(conf *config.Config) {
	for _, w := range conf.Warnings {
		d.logger.Warn("config: "+w.Message, "at", fmt.Sprintf("%s:%d", w.File, w.Line))
	}
}
