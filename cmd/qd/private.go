package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/qd-run/qd/backend"
	"github.com/qd-run/qd/daemon"
	"github.com/qd-run/qd/internal/localpg"
)

// privateCluster is the cluster qd uses when no database is configured:
// state_dir/pg, state_dir being the config's or its default
// ($XDG_STATE_HOME/qd, /var/lib/qd for root). Its first start applies the
// schema, so that it is ready for any command.
func (e *Env) privateCluster() (*localpg.Cluster, error) {
	conf, err := e.Config()
	if err != nil {
		return nil, err
	}
	return localpg.New(filepath.Join(conf.StateDir, "pg"), localpg.Options{Getenv: e.Getenv, Setup: migrateSchema}), nil
}

// privateURL starts the private cluster when it is not running and
// returns its URL, saying what it did when it did something. Inside an
// agent it refuses: the agent's environment is not its daemon's, so it
// would make a cluster of its own rather than find the daemon's queue.
func (e *Env) privateURL(ctx context.Context) (string, error) {
	if e.Getenv("QD_SOCKET") != "" {
		return "", errors.New("no database for this command: inside an agent (QD_SOCKET set) qd reaches its daemon's queue through the socket, for enqueue, run-now, heartbeat and cancel; set QD_DATABASE_URL to use a database directly")
	}
	c, err := e.privateCluster()
	if err != nil {
		return "", err
	}
	if e.readOnly {
		if url, ok := c.Running(); ok {
			return url, nil
		}
		return "", fmt.Errorf("no private PostgreSQL is running in %s (%s), and this command only reads the queue: "+
			"start it with qd db start, or point --db or QD_DATABASE_URL at a server", homeShort(c.Dir(), e.Getenv), e.configOrigin())
	}
	r, err := c.Start(ctx)
	if err != nil {
		return "", err
	}
	switch {
	case r.Created:
		e.note(fmt.Sprintf("made a private PostgreSQL %s cluster in %s and started it (see qd db status)", r.Version, c.Dir()))
	case r.Started:
		e.note(fmt.Sprintf("started the private PostgreSQL %s in %s", r.Version, c.Dir()))
	}
	return r.URL, nil
}

// localServer is the private cluster as a daemon keeps it: started again
// when it dies and, when the daemon runs as a service, stopped once its
// runs are settled (daemon/localserver.go).
func (e *Env) localServer() (*daemon.LocalServer, error) {
	c, err := e.privateCluster()
	if err != nil {
		return nil, err
	}
	s := &daemon.LocalServer{Name: "the private PostgreSQL in " + c.Dir(), Died: c.Died, Await: c.Await,
		Start: func(ctx context.Context) error { _, err := c.Start(ctx); return err }}
	if underService(e.Getenv) {
		s.Stop = func(ctx context.Context) error { _, err := c.Stop(ctx, localpg.Fast); return err }
	}
	return s, nil
}

// underService reports whether a service manager runs this process and
// kills what it leaves behind: systemd sets $INVOCATION_ID for the
// processes of a unit, and launchd names its job in $XPC_SERVICE_NAME
// (com.qd for qd's plist).
func underService(getenv func(string) string) bool {
	return getenv("INVOCATION_ID") != "" || strings.HasPrefix(getenv("XPC_SERVICE_NAME"), "com.qd")
}

// serverNote is what the daemon logs at start about its private cluster.
func serverNote(s *daemon.LocalServer) string {
	if s.Stop != nil {
		return "no database is configured: this service keeps " + s.Name +
			" running, starts it again if it dies, and stops it after its runs when it stops"
	}
	return "no database is configured: this daemon uses " + s.Name +
		", starts it again if it dies, and leaves it running when it stops"
}

// note tells the user about the private cluster: on stderr, or in the
// daemon's log when the daemon collects notes.
func (e *Env) note(msg string) {
	if e.notes != nil {
		*e.notes = append(*e.notes, msg)
		return
	}
	fmt.Fprintf(e.Stderr, "qd: %s\n", msg)
}

// migrateSchema applies the queue's schema to a new private cluster.
func migrateSchema(ctx context.Context, url string) error {
	b, err := backend.Open(ctx, url, nil)
	if err != nil {
		return err
	}
	defer b.Close()
	if b.Schema == nil {
		return nil
	}
	return b.Schema.Migrate(ctx)
}
