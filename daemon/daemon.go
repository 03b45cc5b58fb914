package daemon

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/oklog/run"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/internal/logsink"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/metrics"
	"github.com/qd-run/qd/notify"
	"github.com/qd-run/qd/scheduler"
	"github.com/qd-run/qd/supervisor"
)

// Options is what `qd run` hands the daemon once its flags and config are
// read.
type Options struct {
	Config *config.Config
	// Open opens the queue (backend.Open), with the daemon's logger for
	// the backend's own log; the daemon closes it when it stops. When nil,
	// Queue is used as it is, and left open.
	Open  func(logger hclog.Logger) (*lease.Backend, error)
	Queue *lease.Backend
	// Stderr receives the log, through a queue that never blocks.
	Stderr io.Writer
	// Note is logged first (where the config came from, when no file was),
	// then Notes, then Warnings as warnings: what the command learnt before
	// the log existed, such as the start of a private database.
	Note     string
	Notes    []string
	Warnings []string
	Version  string
	// Signals delivers SIGINT, SIGTERM, SIGHUP and SIGPIPE. When nil the
	// daemon subscribes to them itself.
	Signals <-chan os.Signal
	// Server, when not nil, is the database server whose life is the
	// daemon's (the private cluster): started again when it dies, and
	// stopped after the drain when its Stop is set (localserver.go).
	Server *LocalServer
}

// daemon holds what `qd run` wires together.
type daemon struct {
	logger   hclog.Logger
	logOut   *logsink.Writer
	backend  *lease.Backend // the queue and its abilities, each nil where it lacks one
	queue    lease.Provider // backend.Provider
	names    lease.NameRegistry
	sup      *supervisor.Supervisor
	sched    *scheduler.Scheduler
	service  serviceManager // sd_notify(3): READY, STOPPING, the watchdog
	started  time.Time
	instance string
	version  string
	inc      *incarnation

	metrics    *metrics.Metrics
	exposition http.Handler // metrics.Handler, served on /v1/metrics

	mu         sync.Mutex
	conf       *config.Config
	last       map[string]api.LastOutcome // by agent; see runEnded
	sender     *notify.Sender             // tells whom the config names of what failed
	lanesDirty chan struct{}              // see keepLanes
	reloadErr  string
	dbErr      string
	stateLost  string // see keepStateDir

	lastDog time.Time // guarded by the supervisor loop, its only caller

	starts startHold    // claims held after starts failed for want of resources
	hold   claimHoldLog // claims held after the database server changed
	runs   runsSocket   // for runs as another user
}

// Run is the daemon, start to finish: logger, queue, state directory and
// name, supervisor, scheduler, socket, then one oklog/run actor per
// component. It returns when the daemon has drained after a signal, or
// with the error that kept it from starting.
func Run(ctx context.Context, o Options) error {
	conf := o.Config
	logOut := logsink.New(o.Stderr, logsink.DefaultLines)
	defer logOut.Close(2 * time.Second)
	logger := newLogger(logOut, conf)
	if o.Note != "" {
		logger.Info(o.Note)
	}
	for _, n := range o.Notes {
		logger.Info(n)
	}
	for _, w := range o.Warnings {
		logger.Warn(w)
	}
	b := o.Queue
	closeQueue := func() {}
	if o.Open != nil {
		var err error
		if b, err = o.Open(logger.Named("queue")); err != nil {
			return err
		}
		closeQueue = sync.OnceFunc(b.Close)
		defer closeQueue()
	}
	queue := b.Provider
	d := &daemon{logger: logger, logOut: logOut, backend: b, queue: queue, names: b.Names, conf: conf,
		started: time.Now(), instance: newInstance(), version: o.Version, lanesDirty: make(chan struct{}, 1),
		last: map[string]api.LastOutcome{}}
	d.newMetrics(o.Version)
	if err := d.checkSchema(ctx); err != nil {
		return err
	}
	var err error
	if d.inc, err = beginIncarnation(conf.StateDir, conf.Name, d.instance); err != nil {
		return err
	}
	defer d.inc.close()
	release := func() {} // the local server is this daemon's once it holds the state directory
	if o.Server != nil {
		release = sync.OnceFunc(d.keepServer(o.Server, closeQueue))
		defer release()
	}
	named, err := d.firstClaimName(ctx)
	if err != nil {
		return err
	}
	d.sup, err = supervisor.New(supervisor.Config{
		Provider: queue, Logger: logger, StateDir: conf.StateDir,
		Owner: conf.Name, Instance: d.instance, OnLoop: d.loopPass, OnDone: d.runDone, OnEnd: d.runEnded,
		OnHeartbeat: d.heartbeat, IdlePass: d.idlePass(),
	})
	if err != nil {
		return fmt.Errorf("supervisor.New: %w", err)
	}
	if err := conf.CheckHost(HostOf(d.sup.Containment(), d.sup.BoxSupport)); err != nil {
		return err
	}
	if n, err := d.sup.KillOrphans(); err != nil {
		logger.Warn("could not check for children of a previous run", "error", err)
	} else if n > 0 {
		logger.Warn("killed process groups left by a previous run", "groups", n)
	}
	d.sender = notify.New(notify.Config{Queue: queue, Logger: logger.Named("notify"),
		Env: supervisor.InheritedEnv(os.Environ()), Daemon: conf.Name, Plan: d.notifyPlan})
	d.sched = scheduler.New(scheduler.Config{
		Queue: queue, Runner: runner{d}, Logger: logger.Named("scheduler"),
		Owner: conf.Name, Instance: d.instance, OnClaim: d.claimed, Now: wallClock(),
	})
	d.sched.Set(schedulerAgents(conf), schedulerPeriodics(conf))
	srv, err := api.Listen(conf.Socket, d, logger.Named("status"))
	if err != nil {
		return fmt.Errorf("api.Listen: %w", err)
	}
	serveUI, err := d.dashboard(conf)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	logger.Info("qd started", "supervisor", conf.Name, "instance", d.instance,
		"config", conf.Source(), "socket", srv.Path(), "state_dir", conf.StateDir,
		"agents", len(conf.Agents), "database", b.Where)
	d.logWarnings(conf)

	var g run.Group
	hurry := make(chan struct{})
	drained := make(chan struct{})
	{ // signals: the first TERM/INT drains, a second skips the grace; HUP reloads
		sigs := o.Signals
		if sigs == nil {
			ch := make(chan os.Signal, 8)
			signal.Notify(ch, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)
			defer signal.Stop(ch)
			sigs = ch
		}
		done := make(chan struct{})
		g.Add(func() error {
			for {
				select {
				case s := <-sigs:
					switch s {
					case syscall.SIGHUP:
						d.reload()
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
		g.Add(func() error { return d.sup.Loop(ctx) }, func(error) {
			_ = d.service.Stopping()
			_ = d.service.ExtendTimeout(conf.ShutdownGrace + 15*time.Second)
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
				d.closeRuns()
			}()
		})
	}
	if serveUI != nil { // the dashboard of the ui block, until the drain is over
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { return serveUI(ctx) }, func(error) {
			go func() { <-drained; cancel() }()
		})
	}
	{ // housekeeping: release an earlier incarnation's runs, prune history
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { d.housekeeping(ctx); return nil }, func(error) { cancel() })
	}
	{ // the state directory: remade if deleted under the daemon
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { d.keepStateDir(ctx); return nil }, func(error) { cancel() })
	}
	{ // notifications: sent from the queue until the drain is over, so that
		// the runs that end during it are told too
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { return d.sender.Run(ctx) }, func(error) {
			go func() { <-drained; cancel() }()
		})
	}
	{ // the config's lane blocks, at start and after each reload
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		d.wantLanes()
		g.Add(func() error { d.keepLanes(ctx); return nil }, func(error) { cancel() })
	}
	if d.names != nil { // the daemon's name: renewed while it runs, given up at the end
		ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		g.Add(func() error { d.keepName(ctx, named); return nil }, func(error) { cancel() })
	}
	_ = d.service.Ready()
	_ = d.service.Status("running")
	err = g.Run()
	release()
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

func newInstance() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkSchema refuses to start on a schema that needs `qd migrate`, or that
// a newer qd migrated past what this one can run on. A database that
// cannot be reached is not fatal: claims retry on every tick.
func (d *daemon) checkSchema(ctx context.Context) error {
	if d.backend.Schema == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := d.backend.Schema.CheckSchema(ctx)
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrNotMigrated), errors.Is(err, lease.ErrSchemaNewer):
		return fmt.Errorf("queue: %w", err)
	default:
		d.logger.Warn("database not reachable at start-up; will keep trying", "error", err)
		d.setDBError(err)
	}
	return nil
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
	if err == nil {
		d.answered()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		d.dbErr = ""
		return
	}
	d.dbErr = err.Error()
}

// answered is told that a call to the database succeeded, which ends an
// outage in the log.
func (d *daemon) answered() {
	if o := outageOf(d.logger); o != nil {
		o.reachable()
	}
}

// claimed is the scheduler's OnClaim: counted, and a claim that reached
// the database ends an outage.
func (d *daemon) claimed(agent string, n int, took time.Duration, err error) {
	d.metrics.Claimed(agent, n, took, err)
	if err == nil {
		d.answered()
	}
}

// watchdog is called by the supervisor's heartbeat loop on every pass: a
// wedged loop stops the pings and systemd restarts the daemon, while a
// database outage does not.
func (d *daemon) watchdog() {
	every, ok := d.service.WatchdogInterval()
	if !ok || time.Since(d.lastDog) < every/2 {
		return
	}
	d.lastDog = time.Now()
	_ = d.service.Watchdog()
}

// idlePass is how long the supervisor's loop may sleep with no run live:
// its default, or short enough to feed the service manager's watchdog.
func (d *daemon) idlePass() time.Duration {
	if every, ok := d.service.WatchdogInterval(); ok {
		return min(supervisor.DefaultIdlePass, every/4)
	}
	return 0
}

// runDone is called by the supervisor when a run of agent ends: a hot agent
// claims again at once instead of waiting for its next tick.
func (d *daemon) runDone(agent string) { d.sched.Kick(agent) }
