package pg_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// MustFutureVersion records in schema a version one past this build's,
// with the given floor, as a newer qd's migrate would.
func MustFutureVersion(tb testing.TB, schema string, floor int) int {
	tb.Helper()
	v := pg.LatestVersion() + 1
	_, err := MustConn(tb).Exec(context.Background(),
		fmt.Sprintf(`INSERT INTO %q.schema_migrations (version, name, floor) VALUES ($1, 'future.sql', $2)`, schema), v, floor)
	if err != nil {
		tb.Fatal(err)
	}
	return v
}

// Ensure a qd refuses a schema that a newer qd migrated past what it can
// run on, at open and at migrate, with both versions in the error, and
// runs on one whose newer versions are declared compatible with it.
func TestProvider_SchemaNewer(t *testing.T) {
	ctx := context.Background()
	latest := pg.LatestVersion()
	t.Run("Incompatible", func(t *testing.T) {
		u, schema := MustSchemaURL(t, nil)
		MustOpenURL(t, u, true)
		v := MustFutureVersion(t, schema, latest+1)
		p := MustOpenURL(t, u, false)
		_, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a"})
		if !errors.Is(err, pg.ErrSchemaNewer) {
			t.Fatalf("Enqueue on a newer schema: %v, want ErrSchemaNewer", err)
		}
		for _, want := range []string{fmt.Sprintf("version %d", v), fmt.Sprintf("built for version %d", latest), "upgrade qd"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if err := p.CheckSchema(ctx); !errors.Is(err, pg.ErrSchemaNewer) {
			t.Errorf("CheckSchema: %v, want ErrSchemaNewer", err)
		}
		if err := p.Migrate(ctx); !errors.Is(err, pg.ErrSchemaNewer) {
			t.Errorf("Migrate: %v, want ErrSchemaNewer", err)
		}
	})
	t.Run("Compatible", func(t *testing.T) {
		u, schema := MustSchemaURL(t, nil)
		MustOpenURL(t, u, true)
		MustFutureVersion(t, schema, latest)
		p := MustOpenURL(t, u, false)
		if err := p.Migrate(ctx); err != nil {
			t.Fatalf("Migrate of a newer, compatible schema: %v", err)
		}
		if _, _, err := p.Enqueue(ctx, lease.EnqueueParams{Agent: "a"}); err != nil {
			t.Fatalf("Enqueue on a newer, compatible schema: %v", err)
		}
	})
	t.Run("ChangedUnderARunningQd", func(t *testing.T) {
		// Ensure a provider already at work, whose schema a newer qd then
		// migrates and whose functions it replaces, says why its claims
		// fail instead of "function does not exist".
		u, schema := MustSchemaURL(t, nil)
		p := MustOpenURL(t, u, true)
		MustEnqueue(t, p, lease.EnqueueParams{Agent: "a"})
		if _, err := p.Claim(ctx, lease.ClaimParams{Owner: "d"}); err != nil {
			t.Fatal(err)
		}
		MustFutureVersion(t, schema, latest+1)
		conn := MustConn(t)
		if _, err := conn.Exec(ctx, fmt.Sprintf(`DROP FUNCTION %q.claim`, schema)); err != nil {
			t.Fatal(err)
		}
		_, err := p.Claim(ctx, lease.ClaimParams{Owner: "d"})
		if !errors.Is(err, pg.ErrSchemaNewer) {
			t.Fatalf("Claim after a newer qd replaced the schema: %v, want ErrSchemaNewer", err)
		}
	})
}

// Ensure every migration's floor is at most its own version, and that
// version 17, which only adds a column, keeps qd built for 16 running.
func TestMigrations_Floor(t *testing.T) {
	ctx := context.Background()
	u, schema := MustSchemaURL(t, nil)
	MustOpenURL(t, u, true)
	rows, err := MustConn(t).Query(ctx, fmt.Sprintf(`SELECT version, coalesce(floor, -1) FROM %q.schema_migrations ORDER BY version`, schema))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var v, floor int
		if err := rows.Scan(&v, &floor); err != nil {
			t.Fatal(err)
		}
		n++
		switch {
		case floor < 0:
			t.Errorf("version %d has no floor recorded", v)
		case floor > v:
			t.Errorf("version %d has floor %d, above itself", v, floor)
		case v == 17 && floor != 16:
			t.Errorf("version 17 has floor %d, want 16: it only adds a column", floor)
		case v < 17 && floor != v:
			t.Errorf("version %d has floor %d, want its own version", v, floor)
		}
	}
	if n != pg.LatestVersion() {
		t.Errorf("%d versions recorded, want %d", n, pg.LatestVersion())
	}
}
