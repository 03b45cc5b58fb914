package localpg

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Database is the database Start creates, and the one its URL names.
const Database = "qd"

// Cluster is a private PostgreSQL cluster kept in one directory.
type Cluster struct {
	dir    string
	search search
	setup  func(ctx context.Context, url string) error
}

// Options are what a Cluster takes from its caller.
type Options struct {
	// Getenv reads QD_PG_BINDIR and PATH, where the binaries are looked
	// for; os.Getenv when nil.
	Getenv func(string) string
	// Setup, when set, runs under the lock once the new server is up, with
	// the URL Start returns: qd applies its schema there. Until it has
	// succeeded once, every Start runs it again.
	Setup func(ctx context.Context, url string) error
}

// New returns the cluster kept in dir (state_dir/pg). Nothing is made
// until Start.
func New(dir string, o Options) *Cluster {
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.Getenv
	}
	return &Cluster{dir: dir, search: defaultSearch(getenv), setup: o.Setup}
}

// Dir is the cluster's directory.
func (c *Cluster) Dir() string { return c.dir }

func (c *Cluster) dataDir() string   { return filepath.Join(c.dir, "data") }
func (c *Cluster) logPath() string   { return filepath.Join(c.dir, "server.log") }
func (c *Cluster) setupMark() string { return filepath.Join(c.dataDir(), "qd-setup.done") }

// Result says what Start found and did.
type Result struct {
	URL     string // database qd on the running server
	Created bool   // initdb ran
	Started bool   // the server was started
	Version string // the server's version, when Created or Started
}

// Start returns the URL of database qd on the running server, making and
// starting the cluster first when it must (see the package doc). Any
// number of processes may call it at once: one of them does the work.
func (c *Cluster) Start(ctx context.Context) (Result, error) {
	if url, ok := c.answering(); ok && c.setupDone() {
		return Result{URL: url}, nil
	}
	unlock, err := c.lock(ctx)
	if err != nil {
		return Result{}, err
	}
	defer unlock()
	return c.startLocked(ctx)
}

func (c *Cluster) startLocked(ctx context.Context) (Result, error) {
	var r Result
	var bin binaries
	if _, err := os.Stat(c.dataDir()); errors.Is(err, fs.ErrNotExist) {
		if bin, err = c.search.find(""); err != nil {
			return r, err
		}
		if err := c.create(bin); err != nil {
			return r, err
		}
		r.Created = true
	}
	o, err := existingOwner(c.dataDir())
	if err != nil {
		return r, err
	}
	url, ok, err := c.await(ctx)
	if err != nil {
		return r, err
	}
	if !ok {
		if bin.dir == "" {
			if bin, err = c.search.find(c.dataVersion()); err != nil {
				return r, err
			}
		}
		if err := c.launch(bin, o); err != nil {
			return r, err
		}
		r.Started = true
		if url, ok = c.answering(); !ok {
			return r, fmt.Errorf("the private PostgreSQL in %s started but does not answer on its socket; see %s", c.dir, c.logPath())
		}
	}
	if bin.dir != "" {
		r.Version, _ = bin.version()
	}
	r.URL = url
	return r, c.runSetup(ctx, o, url)
}

// runSetup runs the caller's Setup once, and marks that it succeeded.
func (c *Cluster) runSetup(ctx context.Context, o owner, url string) error {
	if c.setup == nil || c.setupDone() {
		return nil
	}
	if err := c.setup(ctx, url); err != nil {
		return fmt.Errorf("set up the private PostgreSQL in %s: %w", c.dir, err)
	}
	return writeOwned(c.setupMark(), "", o)
}

func (c *Cluster) setupDone() bool {
	if c.setup == nil {
		return true
	}
	_, err := os.Stat(c.setupMark())
	return err == nil
}

// answering returns the URL of the server when it is up (ready, or with no
// status line before PostgreSQL 10) and accepts connections on its socket.
// It takes no lock and starts nothing.
func (c *Cluster) answering() (string, bool) {
	pf, err := readPIDFile(c.dataDir())
	if err != nil || pf.socketDir == "" || (pf.status != "ready" && pf.status != "") {
		return "", false
	}
	conn, err := net.DialTimeout("unix", filepath.Join(pf.socketDir, ".s.PGSQL."+strconv.Itoa(pf.port)), 2*time.Second)
	if err != nil {
		return "", false
	}
	conn.Close()
	o, err := existingOwner(c.dataDir())
	if err != nil {
		return "", false
	}
	return urlFor(pf.socketDir, pf.port, o.name), true
}

// dataVersion is the major version that made the cluster, from PG_VERSION.
func (c *Cluster) dataVersion() string {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "PG_VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// urlFor names database qd on the server whose socket is in dir, as role.
// libpq (psql) and pgx both read it.
func urlFor(dir string, port int, role string) string {
	return "postgres:///" + Database + "?host=" + escape(dir) + "&port=" + strconv.Itoa(port) +
		"&user=" + escape(role) + "&sslmode=disable"
}

// escape percent-encodes all but letters, digits and "/._~-": libpq
// decodes %XX in a URL but not "+".
func escape(s string) string {
	var b strings.Builder
	for _, c := range []byte(s) {
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', strings.IndexByte("/._~-", c) >= 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}
