package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/qd-run/qd/backend"
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

func runMigrate(ctx context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if err := noArgs(args); err != nil {
		return err
	}
	b, err := env.Backend(ctx)
	if err != nil {
		return err
	}
	m := b.Schema
	if m == nil {
		return fmt.Errorf("migrate: the queue at %s has no schema to migrate", b.Where)
	}
	created, err := m.CreateDatabase(ctx)
	if err != nil {
		return err
	}
	if created != "" {
		fmt.Fprintf(env.Stdout, "created database %s\n", created)
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
	switch latest := backend.SchemaVersion(); {
	case after > latest:
		fmt.Fprintf(env.Stdout, "schema %s is at version %d, newer than this qd's %d, which may still run on it; nothing to do\n", m.Schema(), after, latest)
	case after == before:
		fmt.Fprintf(env.Stdout, "schema %s is up to date at version %d\n", m.Schema(), after)
	default:
		fmt.Fprintf(env.Stdout, "schema %s migrated from version %d to %d\n", m.Schema(), before, after)
	}
	return nil
}
