package pg_test

import (
	"compress/gzip"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/pg"
)

// oldMigrations holds the migrations as qd shipped them up to version 4,
// when they still created and altered the functions themselves: frozen
// history, kept gzipped (byte for byte as shipped) so that pg/ holds each
// function's definition in one readable place only, functions/.
const oldMigrations = "testdata/migrations-v4"

// Ensure a schema an older qd made at any version upgrades to exactly the
// tables, indexes and functions of a fresh one, with one of each function.
func TestProvider_MigrateUpgrade(t *testing.T) {
	ctx := context.Background()
	conn := MustConn(t)
	freshURL, fresh := MustSchemaURL(t, nil)
	MustOpenURL(t, freshURL, true)
	want := MustSchemaDump(t, conn, fresh)
	t.Run("FreshFunctions", func(t *testing.T) {
		// Ensure the fresh schema holds one function per file of functions/.
		files, err := filepath.Glob("functions/*.sql")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, f := range files {
			names = append(names, strings.TrimSuffix(filepath.Base(f), ".sql"))
		}
		var got []string
		err = conn.QueryRow(ctx, `SELECT coalesce(array_agg(proname::text ORDER BY proname), '{}')
			FROM pg_proc WHERE pronamespace = $1::text::regnamespace`, fresh).Scan(&got)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, names) {
			t.Errorf("functions of a fresh schema: %q, want one per file of functions/: %q", got, names)
		}
	})
	for v := 1; v <= 4; v++ {
		t.Run("FromVersion"+strconv.Itoa(v), func(t *testing.T) {
			// Ensure the schema an old qd left at version v ends like a fresh one.
			u, schema := MustOldSchema(t, v)
			p := MustOpenURL(t, u, false)
			if got, err := p.SchemaVersion(ctx); err != nil || got != v {
				t.Fatalf("SchemaVersion before Migrate = %d, %v; want %d", got, err, v)
			}
			if err := p.Migrate(ctx); err != nil {
				t.Fatalf("migrate from version %d: %v", v, err)
			}
			MustSameDump(t, want, MustSchemaDump(t, conn, schema))
		})
	}
	t.Run("UpToDate", func(t *testing.T) {
		// Ensure Migrate of a schema at the latest version rewrites nothing,
		// not even its functions.
		var before, after []string
		q := `SELECT array_agg(xmin::text ORDER BY oid) FROM pg_proc WHERE pronamespace = $1::text::regnamespace`
		if err := conn.QueryRow(ctx, q, fresh).Scan(&before); err != nil {
			t.Fatal(err)
		}
		if err := MustOpenURL(t, freshURL, false).Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		if err := conn.QueryRow(ctx, q, fresh).Scan(&after); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(before, after) {
			t.Errorf("functions rewritten by a Migrate with nothing to apply: xmin %v, then %v", before, after)
		}
	})
}

// MustOldSchema makes a schema as a qd of version 4 or older made it at
// version upTo: each migration of that time up to upTo applied as it was
// written then, in its own transaction, and recorded. It returns the
// schema's URL and name.
func MustOldSchema(tb testing.TB, upTo int) (string, string) {
	tb.Helper()
	u, schema := MustSchemaURL(tb, nil)
	conn := MustConn(tb)
	ctx := context.Background()
	q := pgx.Identifier{schema}.Sanitize()
	_, err := conn.Exec(ctx, `CREATE SCHEMA `+q+`;
		CREATE TABLE `+q+`.schema_migrations (
			version    int PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	if err != nil {
		tb.Fatalf("create schema %s: %v", schema, err)
	}
	files, err := filepath.Glob(filepath.Join(oldMigrations, "*.sql.gz"))
	if err != nil {
		tb.Fatal(err)
	}
	expand := strings.NewReplacer("{{schema}}", q, "{{lockspace}}", strconv.Itoa(int(pg.LaneLockSpace)))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".gz")
		num, _, _ := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		if v > upTo {
			break
		}
		b := mustGunzip(tb, f)
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, expand.Replace(string(b))); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO `+q+`.schema_migrations (version, name) VALUES ($1, $2)`, v, name)
			return err
		})
		if err != nil {
			tb.Fatalf("apply old %s: %v", name, err)
		}
	}
	return u, schema
}

// schemaDump lists, one line each, what a schema holds: functions with
// their definitions, columns, the attributes of row types, indexes,
// constraints, relations with their storage options, triggers and recorded
// migrations.
var schemaDump = []string{
	`SELECT 'function ' || p.oid::regprocedure::text || E'\n' || pg_get_functiondef(p.oid)
	 FROM pg_proc p WHERE p.pronamespace = $1::text::regnamespace`,
	`SELECT format('column %s.%s #%s %s %s nullable=%s default=%s identity=%s %s',
	        table_name, column_name, ordinal_position, data_type, udt_name, is_nullable,
	        column_default, is_identity, identity_generation)
	 FROM information_schema.columns WHERE table_schema = $1`,
	`SELECT format('attribute %s.%s #%s %s %s', udt_name, attribute_name, ordinal_position, data_type, attribute_udt_name)
	 FROM information_schema.attributes WHERE udt_schema = $1`,
	`SELECT 'index ' || indexdef FROM pg_indexes WHERE schemaname = $1`,
	`SELECT format('constraint %s %s %s', c.conrelid::regclass, c.conname, pg_get_constraintdef(c.oid))
	 FROM pg_constraint c WHERE c.connamespace = $1::text::regnamespace`,
	`SELECT format('relation %s %s %s', c.relname, c.relkind, c.reloptions)
	 FROM pg_class c WHERE c.relnamespace = $1::text::regnamespace`,
	`SELECT 'trigger ' || pg_get_triggerdef(t.oid)
	 FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
	 WHERE c.relnamespace = $1::text::regnamespace AND NOT t.tgisinternal`,
	`SELECT format('migration %s %s', version, name) FROM %s.schema_migrations`,
}

// MustSchemaDump returns the lines of schemaDump for schema, sorted, with
// the schema's name replaced by SCHEMA.
func MustSchemaDump(tb testing.TB, conn *pgx.Conn, schema string) []string {
	tb.Helper()
	q := pgx.Identifier{schema}.Sanitize()
	norm := strings.NewReplacer(q, "SCHEMA", schema, "SCHEMA")
	var lines []string
	for _, query := range schemaDump {
		args := []any{schema}
		if strings.Contains(query, "FROM %s.") {
			query, args = strings.Replace(query, "%s.", q+".", 1), nil
		}
		rows, err := conn.Query(context.Background(), query, args...)
		if err != nil {
			tb.Fatalf("dump %s: %v", schema, err)
		}
		got, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			tb.Fatalf("dump %s: %v", schema, err)
		}
		for _, l := range got {
			lines = append(lines, norm.Replace(l))
		}
	}
	slices.Sort(lines)
	return lines
}

// MustSameDump fails the test when got and want differ, naming the lines
// each lacks.
func MustSameDump(tb testing.TB, want, got []string) {
	tb.Helper()
	var missing, extra []string
	for _, l := range want {
		if !slices.Contains(got, l) {
			missing = append(missing, l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			extra = append(extra, l)
		}
	}
	if len(missing) > 0 || len(extra) > 0 || len(got) != len(want) {
		tb.Errorf("schema differs from a fresh one (%d lines, want %d)\nmissing:\n%s\nextra:\n%s",
			len(got), len(want), strings.Join(missing, "\n---\n"), strings.Join(extra, "\n---\n"))
	}
}

// mustGunzip reads the gzipped file at path.
func mustGunzip(tb testing.TB, path string) []byte {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	return b
}
