package pg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in version order. Their file
// names start with the version: 001_init.sql.
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
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
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

// Migrate creates the schema if needed and applies every migration it
// lacks, each in its own transaction. Concurrent migrations of one schema
// (several processes running qd migrate) queue on a transaction-scoped
// advisory lock, so each migration is applied exactly once.
func (p *Provider) Migrate(ctx context.Context) error {
	for _, m := range migrations() {
		if err := p.apply(ctx, m); err != nil {
			return err
		}
	}
	p.ready.Store(true)
	return nil
}

func (p *Provider) apply(ctx context.Context, m migration) error {
	tx, err := p.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.ReadCommitted})
	if err != nil {
		return fmt.Errorf("migrate %s: begin: %w", p.schema, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after commit it is a no-op
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
			return fmt.Errorf("migrate %s: prepare: %w", p.schema, err)
		}
	}
	var done bool
	err = tx.QueryRow(ctx, p.sql(`SELECT EXISTS (SELECT 1 FROM {{schema}}.schema_migrations WHERE version = $1)`), m.version).Scan(&done)
	if err != nil {
		return fmt.Errorf("migrate %s: read version: %w", p.schema, err)
	}
	if done {
		return nil
	}
	if _, err := tx.Exec(ctx, expand(m.sql, p.q)); err != nil {
		return fmt.Errorf("migrate %s: apply %s: %w", p.schema, m.name, err)
	}
	if _, err := tx.Exec(ctx, p.sql(`INSERT INTO {{schema}}.schema_migrations (version, name) VALUES ($1, $2)`), m.version, m.name); err != nil {
		return fmt.Errorf("migrate %s: record %s: %w", p.schema, m.name, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("migrate %s: commit %s: %w", p.schema, m.name, err)
	}
	p.logger.Info("applied migration", "schema", p.schema, "migration", m.name)
	return nil
}
