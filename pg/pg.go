package pg

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/lease"
)

// pingIdle is how long a pooled connection may sit idle before it is
// pinged on its next use.
const pingIdle = 10 * time.Second

// DefaultSchema is the schema used when the URL names none.
const DefaultSchema = "qd"

// LaneLockSpace is the first key of every lane's advisory lock
// (pg_advisory_xact_lock(LaneLockSpace, lane_key(lane))): "qdln" in ASCII.
// It keeps qd's lane locks apart from any other advisory locks in the
// database. It must never change.
const LaneLockSpace int32 = 0x71646c6e

// ClaimTokenLockSpace is the first key of the advisory lock a claim takes
// on its token (pg_advisory_xact_lock(ClaimTokenLockSpace,
// hashtext(token))), so that a retried claim waits for an earlier call
// with the same token that is still in flight: "qdct" in ASCII.
const ClaimTokenLockSpace int32 = 0x71646374

// MigrateLockSpace is the first key of the advisory lock that serialises
// migrations of one schema: "qdmg" in ASCII.
const MigrateLockSpace int32 = 0x71646d67

// ErrNotMigrated is returned by every method while the schema is missing
// or older than this build.
var ErrNotMigrated = lease.ErrNotMigrated

var schemaPattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// ReadConns is how many connections the read pool holds at most, and
// ReadStatementTimeout how long one of its statements may run.
const (
	ReadConns            = 3
	ReadStatementTimeout = 15 * time.Second
)

// Provider is a lease.Provider backed by PostgreSQL.
//
// It holds two pools. The first is the lease path's: claims, heartbeats,
// settles, cancel polls, give-backs, the daemon's name. The second, of at
// most ReadConns connections whose statements end after
// ReadStatementTimeout, takes the listings (tasks, runs, lanes for a
// status or a scrape, daemons), the dashboard's reads and writes
// (Dashboard) and the notifier's: however many of those wait, none takes
// a connection a heartbeat needs.
type Provider struct {
	pool   *pgxpool.Pool
	reads  *pgxpool.Pool
	schema string
	q      string // the schema as a quoted identifier
	logger hclog.Logger
	ready  atomic.Bool
	// newerOnce logs, once, that the schema is newer than this build but
	// declared compatible with it.
	newerOnce sync.Once

	// Claims whose outcome is unknown, by token, and the goroutine that
	// gives their runs back (giveback.go); Close ends it.
	pendMu  sync.Mutex
	pending map[string]lease.ClaimParams
	giving  bool
	bg      sync.WaitGroup
	closing context.Context
	stop    context.CancelFunc

	// The server new connections reach, the furthest WAL position seen on
	// it, and when and why it changed (server.go).
	serverMu      sync.Mutex
	server        *serverID
	seenLSN       uint64
	lsnAt         time.Time
	serverChanged time.Time
	changeWhy     string

	// Statements waiting to go out with the next claim (rider.go).
	riderMu sync.Mutex
	riders  []*rider
	// When the last claim went out (Unix ns): a rider waits for the next
	// only when claims come often.
	lastClaim atomic.Int64

	// Transactions sent, committed or not.
	txCount atomic.Int64
}

var _ lease.Provider = (*Provider)(nil)

// Open connects a pool to the database at rawURL. The query parameter
// schema=NAME selects the schema (default qd), and pooler=MODE says that a
// pooler such as PgBouncer stands in front of the server (pooler.go);
// every other parameter goes to pgx. Open checks the schema version once
// but never migrates: while the schema is missing or behind, methods
// return ErrNotMigrated.
func Open(ctx context.Context, rawURL string, logger hclog.Logger) (*Provider, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	connURL, own, err := splitParams(rawURL)
	if err != nil {
		return nil, err
	}
	schema := DefaultSchema
	if s, ok := own["schema"]; ok {
		schema = s
	}
	if !schemaPattern.MatchString(schema) {
		return nil, fmt.Errorf("%w: schema %q does not match %s", lease.ErrInvalid, schema, schemaPattern)
	}
	cfg, err := pgxpool.ParseConfig(connURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url %s: %w", lease.Redact(rawURL), err)
	}
	if err := setPooler(cfg, own["pooler"], connURL); err != nil {
		return nil, fmt.Errorf("parse database url %s: %w", lease.Redact(rawURL), err)
	}
	if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
		cfg.ConnConfig.RuntimeParams["application_name"] = "qd"
	}
	// pgxpool pings a connection idle for more than a second before handing
	// it out. A daemon ticking every second would pay a ping for most of its
	// claims; a broken connection is found by the query itself anyway (every
	// caller retries), so only connections idle for a while are pinged.
	cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool {
		return p.IdleDuration > pingIdle
	}
	p := &Provider{schema: schema, q: quoteIdent(schema), logger: logger.Named("pg")}
	rcfg := readConfig(cfg, own["pooler"], p.afterConnect)
	cfg.AfterConnect = p.afterConnect
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pool %s: %w", lease.Redact(rawURL), err)
	}
	p.pool = pool
	if p.reads, err = pgxpool.NewWithConfig(ctx, rcfg); err != nil {
		pool.Close()
		return nil, fmt.Errorf("open read pool %s: %w", lease.Redact(rawURL), err)
	}
	p.closing, p.stop = context.WithCancel(context.Background())
	if err := p.checkSchema(ctx); err != nil && !errors.Is(err, ErrNotMigrated) {
		p.logger.Warn("cannot check queue schema", "schema", schema, "error", err)
	}
	return p, nil
}

// readConfig is the read pool's config: cfg's, with at most ReadConns
// connections, each with a statement timeout of ReadStatementTimeout. Its
// connections open only when first needed. Behind a transaction-mode
// pooler a session setting would reach other clients' sessions, so there
// the timeout is left to each caller's context.
func readConfig(cfg *pgxpool.Config, pooler string, afterConnect func(context.Context, *pgx.Conn) error) *pgxpool.Config {
	rcfg := cfg.Copy()
	rcfg.MaxConns, rcfg.MinConns = ReadConns, 0
	rcfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if err := afterConnect(ctx, conn); err != nil {
			return err
		}
		if pooler == "transaction" {
			return nil
		}
		_, err := conn.Exec(ctx, fmt.Sprintf("SET statement_timeout = %d", ReadStatementTimeout.Milliseconds()))
		return err
	}
	return rcfg
}

// DriverURL returns rawURL without the parameters qd reads itself
// (schema, pooler), for a tool that connects with pgx on its own.
func DriverURL(rawURL string) (string, error) {
	u, _, err := splitParams(rawURL)
	return u, err
}

// ownParams are the query parameters of a database URL that qd reads
// itself and pgx never sees.
var ownParams = []string{"schema", "pooler"}

// splitParams removes qd's own parameters from a postgres:// URL and
// returns them.
func splitParams(rawURL string) (string, map[string]string, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("parse database url %s: want postgres://user@host/db", lease.Redact(rawURL))
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("parse database url %s: query: %w", lease.Redact(rawURL), lease.ErrInvalid)
	}
	own := map[string]string{}
	for _, k := range ownParams {
		if q.Has(k) {
			own[k] = q.Get(k)
		}
	}
	if len(own) > 0 {
		// Drop only those pairs and keep the rest as written, so that pgx
		// decodes it exactly as it would have without us.
		var keep []string
		for _, kv := range strings.Split(u.RawQuery, "&") {
			if k, _, _ := strings.Cut(kv, "="); !slices.Contains(ownParams, k) {
				keep = append(keep, kv)
			}
		}
		u.RawQuery = strings.Join(keep, "&")
	}
	return u.String(), own, nil
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// Pool returns the lease path's connection pool.
func (p *Provider) Pool() *pgxpool.Pool { return p.pool }

// ReadPool returns the read pool.
func (p *Provider) ReadPool() *pgxpool.Pool { return p.reads }

// Schema returns the schema the provider works in.
func (p *Provider) Schema() string { return p.schema }

// Ping checks that the database answers.
func (p *Provider) Ping(ctx context.Context) error {
	if err := p.pool.Ping(ctx); err != nil {
		return fmt.Errorf("ping database: %w", err)
	}
	return nil
}

// Close closes the pool. Runs of claims whose outcome is still unknown
// get one last, short try at being given back first; those it cannot give
// back end when their leases expire.
func (p *Provider) Close() {
	p.stop()
	p.bg.Wait()
	if len(p.pendingTokens()) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		p.giveBackAll(ctx)
		cancel()
	}
	p.reads.Close()
	p.pool.Close()
}

// checkSchema caches a successful version check; until one succeeds every
// method checks again.
func (p *Provider) checkSchema(ctx context.Context) error {
	if p.ready.Load() {
		return nil
	}
	v, err := p.SchemaVersion(ctx)
	if err != nil {
		return withPoolerHint(err)
	}
	switch latest := LatestVersion(); {
	case v < latest:
		return fmt.Errorf("schema %s is at version %d, this qd needs %d: %w", p.schema, v, latest, ErrNotMigrated)
	case v > latest:
		if err := p.checkNewer(ctx, p.pool, v); err != nil {
			return err
		}
	}
	p.ready.Store(true)
	return nil
}

// CheckSchema says whether this build can run on the schema: nil, or an
// error matching ErrNotMigrated (run qd migrate), ErrSchemaNewer (upgrade
// qd), or the database's own error when it cannot be read.
func (p *Provider) CheckSchema(ctx context.Context) error { return p.checkSchema(ctx) }

// schemaGone reports whether err says that a table, column or function the
// queue's statements name does not exist: the schema changed under a
// running qd (a newer one migrated it), or was dropped.
func schemaGone(err error) bool {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false
	}
	switch pgErr.Code {
	case "42883", "42P01", "42703", "3F000": // undefined function, table, column; invalid schema
		return true
	}
	return false
}

// recheck is the error of a statement that failed because the schema lacks
// what it names: the schema is checked again, so that the error says why
// (a newer qd migrated it, or it is gone), and every later call checks too.
func (p *Provider) recheck(ctx context.Context, err error) error {
	p.ready.Store(false)
	if cerr := p.checkSchema(context.WithoutCancel(ctx)); cerr != nil {
		return unsent{fmt.Errorf("%w (%v)", cerr, err)}
	}
	return err
}

// inTx runs queue in one READ COMMITTED transaction sent as a single
// pipelined batch (one round trip once statements are prepared), whatever
// the server's default isolation, on the lease path's pool.
func (p *Provider) inTx(ctx context.Context, queue func(b *pgx.Batch)) error {
	return p.inTxOn(ctx, p.pool, queue)
}

// readTx is inTx on the read pool, for the writes of the dashboard and
// the notifier: they must not take the lease path's connections.
func (p *Provider) readTx(ctx context.Context, queue func(b *pgx.Batch)) error {
	return p.inTxOn(ctx, p.reads, queue)
}

func (p *Provider) inTxOn(ctx context.Context, pool *pgxpool.Pool, queue func(b *pgx.Batch)) error {
	if err := p.checkSchema(ctx); err != nil {
		return unsent{err}
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire connection: %w", unsent{err})
	}
	released := false
	defer func() {
		if !released {
			conn.Release()
		}
	}()
	p.txCount.Add(1)
	b := &pgx.Batch{}
	b.Queue("BEGIN ISOLATION LEVEL READ COMMITTED")
	queue(b)
	var lsn string
	if p.lsnDue() {
		b.Queue("SELECT pg_current_wal_lsn()::text").QueryRow(func(row pgx.Row) error { return row.Scan(&lsn) })
	}
	b.Queue("COMMIT")
	err = conn.SendBatch(ctx, b).Close()
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' && !conn.Conn().IsClosed() {
		if _, rerr := conn.Exec(context.WithoutCancel(ctx), "ROLLBACK"); rerr != nil {
			conn.Conn().Close(context.WithoutCancel(ctx)) //nolint:errcheck // the pool drops it
		}
	}
	if err == nil && lsn != "" {
		p.sawLSN(lsn)
	}
	if err != nil && schemaGone(err) {
		conn.Release() // the check takes a connection of its own
		released = true
		return p.recheck(ctx, err)
	}
	return err
}

// beginTx opens an interactive READ COMMITTED transaction on pool, for
// the rare operations that need one.
func (p *Provider) beginTx(ctx context.Context, pool *pgxpool.Pool) (pgx.Tx, error) {
	if err := p.checkSchema(ctx); err != nil {
		return nil, err
	}
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return nil, fmt.Errorf("begin transaction: %w", err)
	}
	p.txCount.Add(1)
	return tx, nil
}

// Transactions is how many transactions this provider has sent (begun
// with BEGIN, committed or not); statements sent outside one are not
// counted.
func (p *Provider) Transactions() int64 { return p.txCount.Load() }

// query runs a read outside any explicit transaction, on the read pool.
func (p *Provider) query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.queryOn(ctx, p.reads, sql, args...)
}

func (p *Provider) queryOn(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (pgx.Rows, error) {
	if err := p.checkSchema(ctx); err != nil {
		return nil, err
	}
	return pool.Query(ctx, sql, args...)
}

// sql replaces the schema placeholder in a statement.
func (p *Provider) sql(s string) string { return expand(s, p.q) }

// unsent wraps the error of a transaction that failed before any of it was
// sent, so that pgconn.SafeToRetry says so.
type unsent struct{ err error }

func (e unsent) Error() string     { return e.err.Error() }
func (e unsent) Unwrap() error     { return e.err }
func (e unsent) SafeToRetry() bool { return true }
