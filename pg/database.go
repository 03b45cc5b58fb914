package pg

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// CreateDatabase creates the database the provider's URL names when it
// does not exist, through the server's maintenance database postgres, and
// returns its name; "" when it existed (or another process made it
// first). A role that may not create it gets an error saying who can.
func (p *Provider) CreateDatabase(ctx context.Context) (string, error) {
	cfg := p.pool.Config().ConnConfig.Copy()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err == nil {
		conn.Close(ctx)
		return "", nil
	}
	if !hasCode(err, "3D000") { // invalid_catalog_name: no such database
		return "", fmt.Errorf("connect to database %s: %w", cfg.Database, err)
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
