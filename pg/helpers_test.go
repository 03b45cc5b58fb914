package pg_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sync/atomic"
	"testing"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease/leasetest"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// TestURL returns the test database URL, skipping (or failing under CI)
// when the database cannot be reached.
func MustTestURL(tb testing.TB) string {
	tb.Helper()
	return testkit.MustDatabaseURL(tb)
}

// MustSchemaURL returns a URL naming a fresh schema that is dropped when
// the test ends, with extra query parameters added.
func MustSchemaURL(tb testing.TB, extra url.Values) (string, string) {
	tb.Helper()
	return testkit.MustSchema(tb, extra)
}

// MustOpen opens a provider on a fresh, migrated schema.
func MustOpen(tb testing.TB) *pg.Provider {
	tb.Helper()
	u, _ := MustSchemaURL(tb, nil)
	return MustOpenURL(tb, u, true)
}

// MustOpenURL opens a provider on u, migrating when asked, and closes it
// when the test ends.
func MustOpenURL(tb testing.TB, u string, migrate bool) *pg.Provider {
	tb.Helper()
	ctx := context.Background()
	p, err := pg.Open(ctx, u, hclog.NewNullLogger())
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(p.Close)
	if migrate {
		if err := p.Migrate(ctx); err != nil {
			tb.Fatalf("migrate: %v", err)
		}
	}
	return p
}

// MustConn opens a plain connection to the test database.
func MustConn(tb testing.TB) *pgx.Conn {
	tb.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, MustTestURL(tb))
	if err != nil {
		tb.Fatalf("connect: %v", err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func MustEnqueue(tb testing.TB, p lease.Provider, ep lease.EnqueueParams) int64 {
	tb.Helper()
	id, _, err := p.Enqueue(context.Background(), ep)
	if err != nil {
		tb.Fatalf("enqueue %+v: %v", ep, err)
	}
	return id
}

// dbSeq numbers the databases this process creates.
var dbSeq atomic.Int64

// MustDatabaseURL creates a database of its own for a test that measures
// vacuum-sensitive figures: transactions in other databases of the server
// (other packages' tests) do not hold back its cleanup horizon.
func MustDatabaseURL(tb testing.TB) string {
	tb.Helper()
	base := MustTestURL(tb)
	name := fmt.Sprintf("qdtest_db_%d_%d", os.Getpid(), dbSeq.Add(1))
	conn := MustConn(tb)
	ctx := context.Background()
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}

// Helpers shared with the conformance suite.
var (
	MustClaim = leasetest.MustClaim
	MustTask  = leasetest.MustTask
	MustRun   = leasetest.MustRun
)
