package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// laneLimit is the max_running of every lane in the claim
// measurements: high enough that no lane limit is ever reached, so every
// claim finds work while still paying for the lane lock and live-run count.
const laneLimit = 1_000_000

// fixture is one schema of its own, migrated by package pg.
type fixture struct {
	p      *pg.Provider
	url    string // with the schema parameter
	schema string
	lanes  []string
	logger hclog.Logger
}

// pool returns the provider's connection pool.
func (f *fixture) pool() *pgxpool.Pool { return f.p.Pool() }

// sql replaces {s} in stmt with the quoted schema.
func (f *fixture) sql(stmt string) string {
	return strings.ReplaceAll(stmt, "{s}", pgx.Identifier{f.schema}.Sanitize())
}

// schemaURL returns rawURL with schema set and a pool large enough for 16
// claimers plus the bench's own queries, unless the URL sizes the pool.
func schemaURL(rawURL, schema string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("parse database url %s: %w", lease.Redact(rawURL), err)
	}
	q := u.Query()
	q.Set("schema", schema)
	if !q.Has("pool_max_conns") {
		q.Set("pool_max_conns", "24")
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// newRunID returns a short random name part for the bench's schemas.
func newRunID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// openFixture creates and migrates schema, then creates lanes l0000… with
// a limit no claim reaches.
func openFixture(ctx context.Context, rawURL, schema string, lanes int, logger hclog.Logger) (*fixture, error) {
	u, err := schemaURL(rawURL, schema)
	if err != nil {
		return nil, err
	}
	p, err := pg.Open(ctx, u, logger)
	if err != nil {
		return nil, fmt.Errorf("pg.Open: %w", err)
	}
	f := &fixture{p: p, url: u, schema: schema, logger: logger}
	if err := p.Migrate(ctx); err != nil {
		f.close(ctx)
		return nil, fmt.Errorf("migrate schema %s: %w", schema, err)
	}
	for i := range lanes {
		f.lanes = append(f.lanes, laneName(i))
	}
	_, err = f.pool().Exec(ctx, f.sql(`INSERT INTO {s}.lanes (name, max_running)
		SELECT unnest($1::text[]), $2`), f.lanes, laneLimit)
	if err != nil {
		f.close(ctx)
		return nil, fmt.Errorf("create lanes in %s: %w", schema, err)
	}
	return f, nil
}

func laneName(i int) string { return fmt.Sprintf("l%04d", i) }

// close drops the schema and closes the pool.
func (f *fixture) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	_, err := f.pool().Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{f.schema}.Sanitize()+" CASCADE")
	f.p.Close()
	if err != nil {
		f.logger.Warn("cannot drop bench schema; drop it by hand", "schema", f.schema, "error", err)
	}
}

// reset empties tasks and runs, queues n tasks spread evenly over the
// lanes, and analyzes both tables.
func (f *fixture) reset(ctx context.Context, n int) error {
	if _, err := f.pool().Exec(ctx, f.sql(`TRUNCATE {s}.task_deps, {s}.runs, {s}.tasks`)); err != nil {
		return fmt.Errorf("truncate %s: %w", f.schema, err)
	}
	if err := f.addQueued(ctx, n); err != nil {
		return err
	}
	return f.analyze(ctx)
}

// addQueued queues n more tasks, round robin over the lanes, all eligible
// now and of equal priority (so ids decide their order).
func (f *fixture) addQueued(ctx context.Context, n int) error {
	_, err := f.pool().Exec(ctx, f.sql(`INSERT INTO {s}.tasks
		(lane, agent, payload, payload_text, priority, run_after, max_attempts, state)
		SELECT 'l' || lpad((g % $2)::text, 4, '0'), 'bench', '{}'::jsonb, '{}', 0,
		       now() - interval '1 hour', 3, 'queued'
		FROM generate_series(0, $1 - 1) g`), n, len(f.lanes))
	if err != nil {
		return fmt.Errorf("queue %d tasks in %s: %w", n, f.schema, err)
	}
	return nil
}

// addFinished adds n finished tasks, each with one completed run, in
// chunks of a million rows per transaction.
func (f *fixture) addFinished(ctx context.Context, n int) error {
	const chunk = 1_000_000
	for done := 0; done < n; done += chunk {
		k := min(chunk, n-done)
		_, err := f.pool().Exec(ctx, f.sql(`WITH t AS (
			INSERT INTO {s}.tasks (lane, agent, payload, payload_text, priority, run_after,
			                       attempts, max_attempts, state, created_at, updated_at, finished_at)
			SELECT 'l' || lpad((g % $2)::text, 4, '0'), 'bench', '{}'::jsonb, '{}', 0,
			       now() - interval '2 days', 1, 3, 'done',
			       now() - interval '2 days', now() - interval '1 day', now() - interval '1 day'
			FROM generate_series(0, $1 - 1) g
			RETURNING id, lane, finished_at)
		INSERT INTO {s}.runs (task_id, lane, agent, attempt, owner, instance, state, started_at,
		                      last_heartbeat_at, lease_expires_at, finished_at, exit_code, summary)
		SELECT t.id, t.lane, 'bench', 1, 'bench-history', '', 'completed', t.finished_at - interval '1 minute',
		       t.finished_at, t.finished_at + interval '4 minutes', t.finished_at, 0, 'ok'
		FROM t`), k, len(f.lanes))
		if err != nil {
			return fmt.Errorf("add %d finished tasks in %s: %w", k, f.schema, err)
		}
	}
	return nil
}

func (f *fixture) analyze(ctx context.Context) error {
	if _, err := f.pool().Exec(ctx, f.sql(`ANALYZE {s}.tasks, {s}.runs, {s}.lanes`)); err != nil {
		return fmt.Errorf("analyze %s: %w", f.schema, err)
	}
	return nil
}

// reopen closes the provider's connections, which makes their backends
// publish their statistics as they exit, and opens new ones on the same
// schema.
func (f *fixture) reopen(ctx context.Context) error {
	f.p.Close()
	p, err := pg.Open(ctx, f.url, f.logger)
	if err != nil {
		return fmt.Errorf("pg.Open: %w", err)
	}
	f.p = p
	return nil
}
