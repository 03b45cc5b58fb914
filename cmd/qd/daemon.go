package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/oklog/run"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/internal/logsink"
	"github.com/qd-run/qd/internal/status"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
	"github.com/qd-run/qd/scheduler"
	"github.com/qd-run/qd/supervisor"
)

// daemon holds what `qd run` wires together.
type daemon struct {
	logger   hclog.Logger
	logOut   *logsink.Writer
	queue    *pg.Provider
	sup      *supervisor.Supervisor
	sched    *scheduler.Scheduler
	notify   status.Notifier
	started  time.Time
	instance string
	inc      *incarnation

	mu        sync.Mutex
	conf      *config.Config
	reloadErr string
	dbErr     string

	lastDog time.Time // guarded by the supervisor loop, its only caller
}

// runDaemon is the daemon, start to finish: config, logger, pool, provider,
// supervisor, scheduler, socket, then one actor per component.
func runDaemon(ctx context.Context, env *Env, conf *config.Config, url, note string) error {
	logOut := logsink.New(env.Stderr, logsink.DefaultLines)
	defer logOut.Close(2 * time.Second)
	logger := newLogger(logOut, conf)
	if note != "" {
		logger.Info(note)
	}
	queue, err := pg.Open(context.WithoutCancel(ctx), url, logger)
	if err != nil {
		return fmt.Errorf("pg.Open: %w", err)
	}
	defer queue.Close()
	d := &daemon{logger: logger, logOut: logOut, queue: queue, conf: conf, started: time.Now(), instance: newInstance()}
	if err := d.checkSchema(ctx); err != nil {
		return err
	}
	if d.inc, err = beginIncarnation(conf.StateDir, conf.Name, d.instance); err != nil {
		return err
	}
	defer d.inc.close()
	named := false
	if d.dbError() == "" {
		var inUse *errNameInUse
		switch err := d.claimName(ctx); {
		case errors.As(err, &inUse):
			return err
		case err != nil:
			logger.Warn("could not record this daemon's name; will keep trying", "error", err)
		default:
			named = true
		}
	}
	d.sup, err = supervisor.New(supervisor.Config{
		Provider: queue, Logger: logger, StateDir: conf.StateDir,
		Owner: conf.Name, Instance: d.instance, OnLoop: d.watchdog, OnDone: d.runDone,
	})
	if err != nil {
		return fmt.Errorf("supervisor.New: %w", err)
	}
	if n, err := d.sup.KillOrphans(); err != nil {
		logger.Warn("could not check for children of a previous run", "error", err)
	} else if n > 0 {
		logger.Warn("killed process groups left by a previous run", "groups", n)
	}
	d.sched = scheduler.New(scheduler.Config{
		Queue: queue, Runner: runner{d}, Logger: logger.Named("scheduler"),
		Owner: conf.Name, Instance: d.instance,
	})
	d.sched.Set(schedulerAgents(conf), schedulerPeriodics(conf))
	srv, err := status.Listen(conf.Socket, d.snapshot, logger.Named("status"))
	if err != nil {
		return fmt.Errorf("status.Listen: %w", err)
	}
	srv.Handle("POST /v1/runs/{id}/progress", d.handleProgress)
	logger.Info("qd started", "supervisor", conf.Name, "instance", d.instance,
		"config", configName(conf), "socket", srv.Path(), "state_dir", conf.StateDir,
		"agents", len(conf.Agents), "database", lease.Redact(url))

	var g run.Group
	hurry := make(chan struct{})
	drained := make(chan struct{})
	{ // signals: the first TERM/INT drains, a second skips the grace; HUP reloads
		sigs := daemonSignals
		if sigs == nil {
			sigs = make(chan os.Signal, 8)
			signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
		}
		done := make(chan struct{})
		g.Add(func() error {
			for {
				select {
				case s := <-sigs:
					switch s {
					case syscall.SIGHUP:
						d.reload(env)
						continue
					case syscall.SIGPIPE:
						continue
					}
					logger.Info("signal received: draining", "signal", s.String(), "grace", conf.ShutdownGrace)
					go secondSignal(sigs, hurry, logger)
					return nil
				case <-done:
					return nil
				}
			}
		}, func(error) { close(done) })
	}
	{ // scheduler: stops claiming at once
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { return d.sched.Run(ctx) }, func(error) { cancel() })
	}
	{ // supervisor: drains its children, then settles what is left
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { return d.sup.Run(ctx) }, func(error) {
			_ = d.notify.Stopping()
			_ = d.notify.ExtendTimeout(conf.ShutdownGrace + 15*time.Second)
			go func() {
				d.sup.Drain(conf.ShutdownGrace, hurry)
				cancel()
				close(drained)
			}()
		})
	}
	{ // status socket: answers until the drain is over
		g.Add(srv.Serve, func(error) {
			go func() {
				<-drained
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				defer cancel()
				_ = srv.Shutdown(ctx)
			}()
		})
	}
	{ // housekeeping: release an earlier incarnation's runs, prune history
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { d.housekeeping(ctx); return nil }, func(error) { cancel() })
	}
	{ // the daemon's name: renewed while it runs, given up at the end
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { d.keepName(ctx, named); return nil }, func(error) { cancel() })
	}
	_ = d.notify.Ready()
	_ = d.notify.Status("running")
	err = g.Run()
	logger.Info("qd stopped")
	return err
}

func secondSignal(sigs <-chan os.Signal, hurry chan<- struct{}, logger hclog.Logger) {
	for s := range sigs {
		if s == syscall.SIGINT || s == syscall.SIGTERM {
			logger.Warn("second signal: killing children now", "signal", s.String())
			close(hurry)
			return
		}
	}
}

// newLogger logs to out, which must never block (see logsink).
func newLogger(out io.Writer, conf *config.Config) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:       "qd",
		Level:      hclog.LevelFromString(conf.LogLevel),
		JSONFormat: conf.LogFormat == "json",
		Output:     out,
	})
}

func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkSchema refuses to start on a schema that needs `qd migrate`. A
// database that cannot be reached is not fatal: claims retry on every tick.
func (d *daemon) checkSchema(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := d.queue.SchemaVersion(ctx)
	switch {
	case err != nil:
		d.logger.Warn("database not reachable at start-up; will keep trying", "error", err)
		d.setDBError(err)
	case v < pg.LatestVersion():
		return fmt.Errorf("queue schema %q is at version %d, this qd needs %d: run `qd migrate`", d.queue.Schema(), v, pg.LatestVersion())
	}
	return nil
}

// housekeeping abandons the runs that earlier incarnations of this daemon
// (proved gone by the state directory's lock, their children killed by
// KillOrphans) left marked running, then prunes finished tasks when the
// config sets a retention.
func (d *daemon) housekeeping(ctx context.Context) {
	for delay := time.Second; ; delay = min(delay*2, 30*time.Second) {
		err := d.abandonEarlier(ctx)
		if err == nil {
			break
		}
		d.setDBError(err)
		if sleepCtx(ctx, delay) != nil {
			return
		}
	}
	for {
		every := time.Hour
		if r := d.config().Retention; r > 0 {
			d.prune(ctx, r)
			every = min(max(r/10, time.Minute), time.Hour)
		}
		if sleepCtx(ctx, every) != nil {
			return
		}
	}
}

// abandonEarlier abandons the runs of the earlier incarnations, then
// forgets them.
func (d *daemon) abandonEarlier(ctx context.Context) error {
	for name, instances := range d.inc.byName() {
		ids, err := d.queue.AbandonOwner(ctx, name, instances, "supervisor restarted")
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			d.logger.Warn("abandoned runs of an earlier incarnation", "runs", ids, "instances", instances)
		}
	}
	if err := d.inc.released(); err != nil {
		d.logger.Warn("could not forget the earlier incarnations; the next start abandons their runs again", "error", err)
	}
	return nil
}

func (d *daemon) prune(ctx context.Context, older time.Duration) {
	res, err := d.queue.Prune(ctx, older, false)
	if err != nil {
		d.logger.Warn("prune finished tasks", "error", err)
		return
	}
	for _, id := range res.RunIDs {
		if err := os.Remove(supervisor.LogPath(d.config().StateDir, id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			d.logger.Warn("remove run log", "run_id", id, "error", err)
		}
	}
	if res.Tasks > 0 {
		d.logger.Info("pruned finished tasks", "tasks", res.Tasks, "runs", res.Runs, "older_than", older)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (d *daemon) config() *config.Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.conf
}

func (d *daemon) dbError() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.dbErr
}

func (d *daemon) setDBError(err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.dbErr = ""
		return
	}
	d.dbErr = err.Error()
}

// reload reads the config file again. Agents and periodic schedules change
// at once, without touching running children; an invalid file is reported
// and the old config stays. Settings that need a restart are left as they
// were, with a warning.
func (d *daemon) reload(env *Env) {
	_ = d.notify.Reloading()
	defer func() { _ = d.notify.Ready() }()
	old := d.config()
	if old.Path == "" {
		d.logger.Info("reload: no config file to read again")
		return
	}
	conf, err := config.Load(old.Path)
	if err != nil {
		d.logger.Error("reload failed; keeping the running config", "error", err)
		d.mu.Lock()
		d.reloadErr = err.Error()
		d.mu.Unlock()
		_ = d.notify.Status("reload failed: " + firstLine(err.Error()))
		return
	}
	for _, k := range restartOnly(old, conf) {
		d.logger.Warn("reload: this setting changes only at restart", "setting", k)
	}
	conf.Database, conf.Name, conf.Socket, conf.StateDir = old.Database, old.Name, old.Socket, old.StateDir
	d.mu.Lock()
	d.conf, d.reloadErr = conf, ""
	d.mu.Unlock()
	env.conf = conf
	d.sched.Set(schedulerAgents(conf), schedulerPeriodics(conf))
	d.logger.Info("config reloaded", "agents", len(conf.Agents), "periodics", len(conf.Periodics))
	_ = d.notify.Status("running")
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
	return out
}

func firstLine(s string) string {
	for i := range len(s) {
		if s[i] == '\n' {
			return s[:i]
		}
	}
	return s
}

// watchdog is called by the supervisor's heartbeat loop on every pass: a
// wedged loop stops the pings and systemd restarts the daemon, while a
// database outage does not.
func (d *daemon) watchdog() {
	every, ok := d.notify.WatchdogInterval()
	if !ok || time.Since(d.lastDog) < every/2 {
		return
	}
	d.lastDog = time.Now()
	_ = d.notify.Watchdog()
}

// runDone is called by the supervisor when a run of agent ends: a hot agent
// claims again at once instead of waiting for its next tick.
func (d *daemon) runDone(agent string) { d.sched.Kick(agent) }

// runner adapts the supervisor to the scheduler.
type runner struct{ d *daemon }

func (r runner) Running(agent string) int { return r.d.sup.Running(agent) }

func (r runner) Start(agent string, l *lease.Lease, claimed time.Time) error {
	conf := r.d.config()
	a := conf.Agent(agent)
	if a == nil { // removed by a reload between the claim and now
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := r.d.queue.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned,
			Refund: true, Summary: "agent " + agent + " is no longer in the config"})
		return err
	}
	sp := spec(conf, a)
	sp.Claimed = claimed
	return r.d.sup.Start(l, sp)
}

func spec(conf *config.Config, a *config.Agent) supervisor.Spec {
	env := make(map[string]string, len(a.Env)+1)
	for k, v := range a.Env {
		env[k] = v
	}
	env["QD_SOCKET"] = conf.Socket
	return supervisor.Spec{
		Agent: a.Name, Command: a.Command, Dir: a.Dir, Env: env,
		Lease: a.Lease, Heartbeat: a.Heartbeat, Timeout: a.Timeout,
		StallTimeout: a.StallTimeout, KillGrace: a.KillGrace, RetryBackoff: a.RetryBackoff,
	}
}

func schedulerAgents(conf *config.Config) []scheduler.Agent {
	out := make([]scheduler.Agent, 0, len(conf.Agents))
	for _, a := range conf.Agents {
		out = append(out, scheduler.Agent{
			Name: a.Name, Schedule: a.Sched, Spec: a.Schedule,
			Lanes: a.Lanes, Parallel: a.Parallel, Lease: a.Lease,
		})
	}
	return out
}

func schedulerPeriodics(conf *config.Config) []scheduler.Periodic {
	out := make([]scheduler.Periodic, 0, len(conf.Periodics))
	for _, p := range conf.Periodics {
		out = append(out, scheduler.Periodic{
			Name: p.Name, Schedule: p.Sched, CatchUp: p.CatchUp == config.CatchUpOnce,
			Task: lease.EnqueueParams{
				Lane: p.Lane, Agent: p.Agent, Payload: []byte(p.Payload),
				Priority: p.Priority, MaxAttempts: p.MaxAttempts,
			},
		})
	}
	return out
}
