package bench

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// database is a database of its own that the bench creates for the parts
// that run a daemon, so that the server's counters for it (transactions,
// backends) count the daemon and nothing else. The bench watches it from
// a connection to the database it was given.
type database struct {
	name  string
	admin *pgx.Conn // to the database the bench was given
	base  *url.URL  // the URL the bench was given, without a schema
	queue *pg.Provider
}

// Application names of the connections to a bench database, so that the
// server's activity view tells the daemon's backends from the bench's.
const (
	daemonApp = "qd-bench-daemon"
	benchApp  = "qd-bench"
)

// createDatabase creates the database qd_bench_<id>_<part>, migrates the
// queue schema in it and creates lanes with limit laneMax. On error it
// drops what it created.
func (b *runner) createDatabase(ctx context.Context, part string, lanes []string, laneMax int) (*database, error) {
	u, err := url.Parse(b.o.DatabaseURL)
	if err != nil {
		return nil, fmt.Errorf("parse database url %s: %w", lease.Redact(b.o.DatabaseURL), err)
	}
	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", lease.Redact(u.String()), err)
	}
	d := &database{name: "qd_bench_" + b.id + "_" + part, admin: admin, base: u}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{d.name}.Sanitize()); err != nil {
		admin.Close(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("create database %s (the bench needs a role that may create databases): %w", d.name, err)
	}
	b.log.Info("created database", "database", d.name)
	d.queue, err = pg.Open(ctx, d.url(benchApp), b.log)
	if err == nil {
		err = d.queue.Migrate(ctx)
	}
	if err == nil {
		_, err = d.queue.Pool().Exec(ctx, d.sql(`INSERT INTO {s}.lanes (name, max_running) SELECT unnest($1::text[]), $2`), lanes, laneMax)
	}
	if err != nil {
		d.drop(ctx, b)
		return nil, fmt.Errorf("set up queue in database %s: %w", d.name, err)
	}
	return d, nil
}

// url returns the URL of the database's queue schema (qd), its
// connections named app.
func (d *database) url(app string) string {
	u := *d.base
	u.Path = "/" + d.name
	q := u.Query()
	q.Set("schema", pg.DefaultSchema)
	q.Set("application_name", app)
	u.RawQuery = q.Encode()
	return u.String()
}

// sql replaces {s} in stmt with the queue schema.
func (d *database) sql(stmt string) string {
	return strings.ReplaceAll(stmt, "{s}", pgx.Identifier{pg.DefaultSchema}.Sanitize())
}

// drop closes the bench's connections and drops the database with any
// connection still open to it.
func (d *database) drop(ctx context.Context, b *runner) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if d.queue != nil {
		d.queue.Close()
	}
	_, err := d.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)")
	if err != nil {
		b.log.Warn("cannot drop bench database; drop it by hand", "database", d.name, "error", err)
	} else {
		b.log.Info("dropped database", "database", d.name)
	}
	d.admin.Close(ctx)
}

// transactions is how many transactions the server has counted in the
// database (commits and rollbacks), and how many of them committed. Backends publish their counts at the
// end of a transaction at most once a second (and at exit), so a reading
// lags by up to about a second.
func (d *database) transactions(ctx context.Context) (xacts, commits int64, err error) {
	err = d.admin.QueryRow(ctx, `SELECT xact_commit + xact_rollback, xact_commit FROM pg_stat_database WHERE datname = $1`, d.name).Scan(&xacts, &commits)
	if err != nil {
		return 0, 0, fmt.Errorf("read transactions of database %s: %w", d.name, err)
	}
	return xacts, commits, nil
}

// backends lists the pids of the server processes serving connections of
// app to the database.
func (d *database) backends(ctx context.Context, app string) ([]int, error) {
	rows, err := d.admin.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND application_name = $2`, d.name, app)
	if err != nil {
		return nil, fmt.Errorf("list backends of database %s: %w", d.name, err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("list backends of database %s: %w", d.name, err)
	}
	out := make([]int, len(pids))
	for i, p := range pids {
		out[i] = int(p)
	}
	return out, nil
}

// clockOffset estimates the database clock minus the local clock from the
// quickest of a few round trips.
func (d *database) clockOffset(ctx context.Context) (time.Duration, error) {
	best, off := time.Duration(-1), time.Duration(0)
	for range 7 {
		var db time.Time
		t0 := time.Now()
		if err := d.admin.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&db); err != nil {
			return 0, fmt.Errorf("read database clock: %w", err)
		}
		rtt := time.Since(t0)
		if best < 0 || rtt < best {
			best, off = rtt, db.Sub(t0.Add(rtt/2))
		}
	}
	return off, nil
}
