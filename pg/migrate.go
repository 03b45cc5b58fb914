package pg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/qd-run/qd/lease"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	// floor is the oldest schema version a qd may be built for and still
	// run on a schema at this version: the migration's "-- floor: N" line,
	// else its own version (a change older builds cannot run on).
	floor int
	name  string
	sql   string
}

// floorSince is the first version whose schema_migrations has the floor
// column: the rows of earlier versions are written without it.
const floorSince = 17

var floorLine = regexp.MustCompile(`(?m)^-- floor: ([0-9]+)$`)

// migrations returns the embedded migrations in version order. Their file
// names start with the version: 001_init.sql. They hold DDL only: tables,
// indexes, columns, and the drops of functions whose signature or result
// changed; the functions themselves are in functions/.
func migrations() []migration {
	files, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	var ms []migration
	for _, f := range files {
		base := path.Base(f)
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			panic(fmt.Sprintf("migration %s: name must start with a version number", f))
		}
		b, err := migrationFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		floor := v
		if m := floorLine.FindSubmatch(b); m != nil {
			floor, _ = strconv.Atoi(string(m[1]))
		}
		if floor > v {
			panic(fmt.Sprintf("migration %s: floor %d is above its own version", f, floor))
		}
		ms = append(ms, migration{version: v, floor: floor, name: base, sql: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms
}

// LatestVersion is the schema version this build needs and Migrate
// brings a schema to.
func LatestVersion() int {
	ms := migrations()
	return ms[len(ms)-1].version
}

// expand substitutes the quoted schema and the lane lock space into a
// statement or migration.
func expand(s, quotedSchema string) string {
	return strings.NewReplacer(
		"{{schema}}", quotedSchema,
		"{{lockspace}}", strconv.Itoa(int(LaneLockSpace)),
		"{{tokenspace}}", strconv.Itoa(int(ClaimTokenLockSpace)),
	).Replace(s)
}

// SchemaVersion returns the schema's migration version, 0 when the schema
// or its version table does not exist.
func (p *Provider) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := p.pool.QueryRow(ctx, p.sql(`SELECT coalesce(max(version), 0) FROM {{schema}}.schema_migrations`)).Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read schema version of %s: %w", p.schema, err)
	}
	return v, nil
}

// ErrSchemaNewer is returned by every method, and by Migrate, when a newer
// qd migrated the schema past what this build can run on: versions this
// build does not know have a floor above its own version.
var ErrSchemaNewer = lease.ErrSchemaNewer

// checkNewer is the check of a schema at version v, past this build's: it
// returns an error matching ErrSchemaNewer, naming both versions, unless
// every version past this build's has a floor this build meets.
func (p *Provider) checkNewer(ctx context.Context, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, v int) error {
	latest := LatestVersion()
	var floor int
	err := q.QueryRow(ctx, p.sql(`SELECT coalesce(max(coalesce(floor, version)), 0)
		FROM {{schema}}.schema_migrations WHERE version > $1`), latest).Scan(&floor)
	if err != nil {
		return fmt.Errorf("read the floor of schema %s: %w", p.schema, err)
	}
	if floor > latest {
		return fmt.Errorf("schema %s is at version %d and needs a qd built for version %d or later; this qd is built for version %d: %w",
			p.schema, v, floor, latest, ErrSchemaNewer)
	}
	p.newerOnce.Do(func() {
		p.logger.Warn("queue schema is newer than this qd, and declared compatible with it", "schema", p.schema,
			"version", v, "this_qd", latest, "floor", floor)
	})
	return nil
}

// Migrate creates the schema if needed and brings it to LatestVersion, all
// in one transaction: it applies every migration the schema lacks and
// then, when it applied any, recreates every function (see the package
// doc). Concurrent migrations of one schema (several processes running qd
// migrate) queue on a transaction-scoped advisory lock, so each migration
// is applied exactly once. A schema already at this build's version is left
// as it is, functions included; one past it too, when this build meets the
// floor of every version past its own, else Migrate returns an error
// matching ErrSchemaNewer.
func (p *Provider) Migrate(ctx context.Context) error {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", p.schema, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after commit it is a no-op
	applied, err := p.lockVersions(ctx, tx)
	if err != nil {
		return err
	}
	if v := maxKey(applied); v > LatestVersion() {
		if err := p.checkNewer(ctx, tx, v); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
	}
	var done []string
	for _, m := range migrations() {
		if applied[m.version] {
			continue
		}
		if err := p.apply(ctx, tx, m); err != nil {
			return err
		}
		done = append(done, m.name)
	}
	if len(done) > 0 {
		if err := p.createFunctions(ctx, tx); err != nil {
			return err
		}
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate %s: commit: %w", p.schema, err)
	}
	for _, name := range done {
		p.logger.Info("applied migration", "schema", p.schema, "migration", name)
	}
	if len(done) > 0 {
		p.logger.Info("created functions", "schema", p.schema, "count", len(functions()))
	}
	p.ready.Store(true)
	return nil
}

// lockVersions takes the schema's migration lock, creates the schema and
// its version table if needed, and returns the versions already applied.
func (p *Provider) lockVersions(ctx context.Context, tx pgx.Tx) (map[int]bool, error) {
	steps := []string{
		fmt.Sprintf("SELECT pg_advisory_xact_lock(%d, %d)", MigrateLockSpace, LaneKey(p.schema)),
		p.sql(`CREATE SCHEMA IF NOT EXISTS {{schema}}`),
		p.sql(`CREATE TABLE IF NOT EXISTS {{schema}}.schema_migrations (
			version    int PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`),
	}
	for _, s := range steps {
		if _, err := tx.Exec(ctx, s); err != nil {
			return nil, fmt.Errorf("migrate %s: prepare: %w", p.schema, err)
		}
	}
	rows, err := tx.Query(ctx, p.sql(`SELECT version FROM {{schema}}.schema_migrations`))
	if err != nil {
		return nil, fmt.Errorf("migrate %s: read versions: %w", p.schema, err)
	}
	versions, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return nil, fmt.Errorf("migrate %s: read versions: %w", p.schema, err)
	}
	applied := make(map[int]bool, len(versions))
	for _, v := range versions {
		applied[v] = true
	}
	return applied, nil
}

func maxKey(m map[int]bool) int {
	top := 0
	for k := range m {
		top = max(top, k)
	}
	return top
}

// apply runs one migration's DDL and records its version.
func (p *Provider) apply(ctx context.Context, tx pgx.Tx, m migration) error {
	if _, err := tx.Exec(ctx, expand(m.sql, p.q)); err != nil {
		return fmt.Errorf("migrate %s: apply %s: %w", p.schema, m.name, err)
	}
	insert, args := `INSERT INTO {{schema}}.schema_migrations (version, name) VALUES ($1, $2)`, []any{m.version, m.name}
	if m.version >= floorSince {
		insert, args = `INSERT INTO {{schema}}.schema_migrations (version, name, floor) VALUES ($1, $2, $3)`, append(args, m.floor)
	}
	if _, err := tx.Exec(ctx, p.sql(insert), args...); err != nil {
		return fmt.Errorf("migrate %s: record %s: %w", p.schema, m.name, err)
	}
	return nil
}
