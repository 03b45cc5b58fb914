package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

var migrateCommand = &command{
	name:    "migrate",
	summary: "create the database when missing and apply the schema",
	usage:   "[flags]",
	help: `Creates the database named in the URL when it does not exist and the role
may create databases, then applies every pending schema migration. Safe to run
again, and safe when several processes migrate at once.`,
	db:    true,
	setup: func(*flag.FlagSet) runFunc { return runMigrate },
}

// migrator is the part of a backend that owns a versioned schema.
type migrator interface {
	Migrate(ctx context.Context) error
	SchemaVersion(ctx context.Context) (int, error)
}

func runMigrate(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	raw, err := env.URL(ctx)
	if err != nil {
		return err
	}
	if isPostgresURL(raw) {
		created, err := ensureDatabase(ctx, raw)
		if err != nil {
			return err
		}
		if created != "" {
			fmt.Fprintf(env.Stdout, "created database %s\n", created)
		}
	}
	p, err := env.Provider(ctx)
	if err != nil {
		return err
	}
	m, ok := p.(migrator)
	if !ok {
		return fmt.Errorf("migrate: the backend for %s has no schema to migrate", lease.Redact(raw))
	}
	before, err := m.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	if err := m.Migrate(ctx); err != nil {
		return err
	}
	after, err := m.SchemaVersion(ctx)
	if err != nil {
		return err
	}
	switch latest := pg.LatestVersion(); {
	case after > latest:
		fmt.Fprintf(env.Stdout, "schema %s is at version %d, newer than this qd's %d, which may still run on it; nothing to do\n", schemaName(raw), after, latest)
	case after == before:
		fmt.Fprintf(env.Stdout, "schema %s is up to date at version %d\n", schemaName(raw), after)
	default:
		fmt.Fprintf(env.Stdout, "schema %s migrated from version %d to %d\n", schemaName(raw), before, after)
	}
	return nil
}

func isPostgresURL(raw string) bool {
	return strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://")
}

// schemaName is the schema a URL selects with ?schema=, "qd" by default.
func schemaName(raw string) string {
	if u, err := url.Parse(raw); err == nil && u.Query().Get("schema") != "" {
		return u.Query().Get("schema")
	}
	return "qd"
}

// pgxConfig parses a qd URL for pgx, leaving out the parameters qd itself
// reads.
func pgxConfig(raw string) (*pgx.ConnConfig, error) {
	u, err := pg.DriverURL(raw)
	if err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return nil, fmt.Errorf("parse database url %s: %w", lease.Redact(raw), err)
	}
	return cfg, nil
}

// ensureDatabase creates the URL's database when it is missing, through the
// postgres maintenance database. It returns the name it created, or "".
func ensureDatabase(ctx context.Context, raw string) (string, error) {
	cfg, err := pgxConfig(raw)
	if err != nil {
		return "", err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		return "", nil
	}
	if !hasCode(err, "3D000") { // invalid_catalog_name: no such database
		return "", fmt.Errorf("connect to %s: %w", lease.Redact(raw), err)
	}
	name := cfg.Database
	admin := cfg.Copy()
	admin.Database = "postgres"
	conn, err = pgx.ConnectConfig(ctx, admin)
	if err != nil {
		return "", fmt.Errorf("database %s does not exist, and connecting to database postgres to create it failed: %w", name, err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	switch {
	case hasCode(err, "42P04"): // duplicate_database: another process won
		return "", nil
	case hasCode(err, "42501"): // insufficient_privilege
		return "", fmt.Errorf("database %s does not exist and this role may not create it; ask an administrator to run: createdb %s", name, name)
	case err != nil:
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

func hasCode(err error, code string) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == code
}
