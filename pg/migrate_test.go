package pg_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// Ensure several processes migrating one fresh schema at once all succeed
// and apply each migration exactly once.
func TestProvider_MigrateConcurrent(t *testing.T) {
	u, schema := MustSchemaURL(t, nil)
	const n = 8
	ps := make([]*pg.Provider, n)
	for i := range ps {
		ps[i] = MustOpenURL(t, u, false)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Migrate(context.Background())
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("migrator %d: %v", i, err)
		}
	}
	var rows, distinct int
	err := ps[0].Pool().QueryRow(context.Background(),
		"SELECT count(*), count(DISTINCT version) FROM "+schema+".schema_migrations").Scan(&rows, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if rows != pg.LatestVersion() || distinct != rows {
		t.Errorf("schema_migrations holds %d rows (%d versions), want %d", rows, distinct, pg.LatestVersion())
	}
	if v, err := ps[0].SchemaVersion(context.Background()); err != nil || v != pg.LatestVersion() {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, pg.LatestVersion())
	}
}

// Ensure Open does not migrate, and that every method then says to run
// qd migrate until Migrate has run.
func TestOpen_NotMigrated(t *testing.T) {
	u, _ := MustSchemaURL(t, nil)
	p := MustOpenURL(t, u, false)
	ctx := context.Background()
	if v, err := p.SchemaVersion(ctx); err != nil || v != 0 {
		t.Fatalf("SchemaVersion of a fresh schema = %d, %v; want 0", v, err)
	}
	_, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a"})
	if !errors.Is(err, pg.ErrNotMigrated) || !strings.Contains(err.Error(), "qd migrate") {
		t.Fatalf("enqueue before migrate: %v, want ErrNotMigrated naming qd migrate", err)
	}
	if _, err := p.Claim(ctx, lease.ClaimParams{Owner: "o"}); !errors.Is(err, pg.ErrNotMigrated) {
		t.Fatalf("claim before migrate: %v, want ErrNotMigrated", err)
	}
	if err := p.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a"}); err != nil {
		t.Fatalf("enqueue after migrate: %v", err)
	}
	// A second provider opened after the migration works at once.
	if _, _, err := MustOpenURL(t, u, false).Enqueue(ctx, lease.EnqueueParams{Agent: "a"}); err != nil {
		t.Fatalf("enqueue through a new provider: %v", err)
	}
}

// Ensure bad schema names are refused and a password never shows in an error.
func TestOpen_Errors(t *testing.T) {
	ctx := context.Background()
	for _, u := range []string{
		"postgres://qd:sekret@127.0.0.1:1/db?schema=Bad-Name",
		"postgres://qd:sekret@127.0.0.1:1/db?schema=a;drop",
		"postgres://qd:sekret@127.0.0.1:1/db?sslmode=nonsense",
		"mysql://qd:sekret@127.0.0.1:1/db",
	} {
		_, err := pg.Open(ctx, u, hclog.NewNullLogger())
		if err == nil {
			t.Errorf("Open(%s) succeeded, want an error", lease.Redact(u))
			continue
		}
		if strings.Contains(err.Error(), "sekret") {
			t.Errorf("Open error shows the password: %v", err)
		}
	}
	p, err := pg.Open(ctx, "postgres://qd:sekret@127.0.0.1:1/db?connect_timeout=1", hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("Open of an unreachable database must succeed lazily: %v", err)
	}
	defer p.Close()
	if err := p.Ping(ctx); err == nil || strings.Contains(err.Error(), "sekret") {
		t.Errorf("Ping of an unreachable database: %v; want an error without the password", err)
	}
}
