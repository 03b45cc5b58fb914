package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"

	"github.com/qd-run/qd/backend"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
)

// Env is what a command may use of the outside world.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string

	// Set by the global flags of the command, when it has them.
	DatabaseURL string // --db
	ConfigPath  string // --config
	JSON        bool   // --json

	// Set from the command: readOnly never starts the private cluster,
	// nameQueue says on stderr which queue a listing on a terminal reads.
	readOnly, nameQueue bool

	queue    *lease.Backend
	conf     *config.Config
	confPath string // the file conf came from, "" for the defaults
	// notes, when not nil, collects what the private cluster has to say
	// instead of stderr: the daemon logs it.
	notes *[]string
}

func newEnv(stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) *Env {
	return &Env{Stdin: stdin, Stdout: stdout, Stderr: stderr, Getenv: getenv}
}

// Backend opens the queue on first use and returns it, with its
// backend's abilities.
func (e *Env) Backend(ctx context.Context) (*lease.Backend, error) {
	if e.queue != nil {
		return e.queue, nil
	}
	url, err := e.URL(ctx)
	if err != nil {
		return nil, err
	}
	b, err := backend.Open(ctx, url, nil)
	if err != nil {
		return nil, err
	}
	e.queue = b
	if e.nameQueue && !e.wantJSON() {
		fmt.Fprintf(e.Stderr, "queue: %s\n", e.queueName(url))
	}
	return b, nil
}

// Provider is Backend's provider, for the commands that need nothing more.
func (e *Env) Provider(ctx context.Context) (lease.Provider, error) {
	b, err := e.Backend(ctx)
	if err != nil {
		return nil, err
	}
	return b.Provider, nil
}

// idAndProvider parses the one task or run id in args, as oneID does, and
// opens the queue.
func (e *Env) idAndProvider(ctx context.Context, what string, args []string) (int64, lease.Provider, error) {
	id, err := oneID(what, args)
	if err != nil {
		return 0, nil, err
	}
	prov, err := e.Provider(ctx)
	return id, prov, err
}

// Close releases the provider, if one was opened.
func (e *Env) Close() {
	if e.queue != nil {
		e.queue.Close()
		e.queue = nil
	}
}

// URL resolves the database URL: --db, then $QD_DATABASE_URL, then the
// config file's database attribute, then the private cluster under the
// state directory, started when it is not running (unless the command
// only reads).
func (e *Env) URL(ctx context.Context) (string, error) {
	url, err := e.configuredURL()
	if err != nil || url != "" {
		return url, err
	}
	return e.privateURL(ctx)
}

// configuredURL is the URL --db, $QD_DATABASE_URL or the config file
// names, or "" when none does.
func (e *Env) configuredURL() (string, error) {
	if e.DatabaseURL != "" {
		return e.DatabaseURL, nil
	}
	if u := e.Getenv("QD_DATABASE_URL"); u != "" {
		return u, nil
	}
	conf, err := e.Config()
	if err != nil {
		return "", err
	}
	return conf.Database, nil
}

// configPath is the config file Config reads, "" when there is none.
func (e *Env) configPath() (string, error) {
	path := e.ConfigPath
	if path == "" {
		path = e.Getenv("QD_CONFIG")
	}
	if path == "" {
		found, _, err := config.Find()
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		path = found
	}
	return path, nil
}

// Config loads the config file: --config or $QD_CONFIG (which must exist),
// else the first of config.SearchPaths that exists. Without a file it
// returns config.Default().
func (e *Env) Config() (*config.Config, error) {
	if e.conf != nil {
		return e.conf, nil
	}
	path, err := e.configPath()
	if err != nil {
		return nil, err
	}
	conf := config.Default()
	if path != "" {
		if conf, err = config.LoadClient(path); err != nil {
			return nil, err
		}
	}
	e.conf, e.confPath = conf, path
	return conf, nil
}
