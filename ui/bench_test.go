package ui_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/pg"
	"github.com/qd-run/qd/ui"
)

// benchTasks is the history the benchmark fills: finished tasks, each with
// one run, spread over a year. QD_UI_BENCH_TASKS changes it, for a quick
// try of the benchmark itself.
var benchTasks = 10_000_000

func init() {
	if n, err := strconv.Atoi(os.Getenv("QD_UI_BENCH_TASKS")); err == nil && n > 0 {
		benchTasks = n
	}
}

// BenchmarkDashboard times each page (its queries and its rendering, in
// process) on a queue with 10 million finished tasks in history. It takes
// minutes to fill the schema, so it runs only with QD_UI_BENCH=1:
//
//	QD_UI_BENCH=1 go test ./ui -run XXX -bench Dashboard -benchtime 20x
//
// QD_UI_BENCH_SCHEMA names a schema to fill once and keep for later runs.
func BenchmarkDashboard(b *testing.B) {
	if testing.Short() || os.Getenv("QD_UI_BENCH") != "1" {
		b.Skip("set QD_UI_BENCH=1 to fill a schema with 10M tasks and time the dashboard's pages")
	}
	p, schema := MustBenchQueue(b)
	base := MustServer(b, p, ui.Options{})
	var taskID int64
	pool := testkit.MustPool(b)
	if err := pool.QueryRow(context.Background(), fmt.Sprintf(`SELECT max(id) FROM %s.tasks WHERE state = 'failed'`, schema)).Scan(&taskID); err != nil {
		b.Fatal(err)
	}
	for _, page := range []struct{ name, path string }{
		{"overview", "/"},
		{"tasks", "/tasks"},
		{"tasks_failed", "/tasks?state=failed"},
		{"tasks_lane_agent", "/tasks?lane=l3&agent=a3"},
		{"tasks_older_page", "/tasks?lane=l3&before=5000000"},
		{"tasks_day_range", "/tasks?from=48h&to=24h"},
		{"tasks_payload_text", "/tasks?text=needle"},
		{"bulk_count", "/tasks/confirm?action=retry&lane=l3"},
		{"task", fmt.Sprintf("/tasks/%d", taskID)},
		{"timeline_hour", "/timeline?range=hour"},
		{"timeline_day", "/timeline?range=day"},
		{"timeline_week", "/timeline?range=week"},
		{"throughput_hour", "/throughput?range=hour"},
		{"throughput_day", "/throughput?range=day"},
		{"throughput_week", "/throughput?range=week"},
		{"api_overview", "/api/overview"},
	} {
		b.Run(page.name, func(b *testing.B) {
			start := time.Now()
			for b.Loop() {
				if code, body := MustGet(b, base, page.path); code != http.StatusOK {
					b.Fatalf("GET %s: status %d: %.300s", page.path, code, body)
				}
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// MustBenchQueue returns a provider on a schema holding the benchmark's
// history, filling it unless QD_UI_BENCH_SCHEMA names one already filled.
func MustBenchQueue(b *testing.B) (*pg.Provider, string) {
	b.Helper()
	ctx := context.Background()
	keep := os.Getenv("QD_UI_BENCH_SCHEMA")
	p, u := MustProvider(b)
	schema := p.Schema()
	if keep != "" {
		kp, err := openUnmigrated(replaceSchema(b, u, keep))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(kp.Close)
		if err := kp.Migrate(ctx); err != nil {
			b.Fatal(err)
		}
		p, schema = kp, keep
	}
	pool := testkit.MustPool(b)
	var n int64
	if err := pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM %s.tasks LIMIT %d) t`, schema, benchTasks)).Scan(&n); err != nil {
		b.Fatal(err)
	}
	if n >= int64(benchTasks) {
		return p, schema
	}
	start := time.Now()
	year := 365 * 24 * time.Hour
	step := year / time.Duration(benchTasks)
	for _, q := range []string{
		`ALTER TABLE {{s}}.runs SET UNLOGGED`,
		`ALTER TABLE {{s}}.tasks SET UNLOGGED`,
		`INSERT INTO {{s}}.lanes (name, max_running) SELECT 'l' || i, 4 FROM generate_series(0, 19) i ON CONFLICT DO NOTHING`,
		// The history: 97% done, 2% failed, 1% cancelled, over the past year,
		// oldest first so that ids grow with time as they do in a queue.
		`INSERT INTO {{s}}.tasks (lane, agent, payload, payload_text, priority, run_after, attempts, max_attempts,
			state, created_at, updated_at, finished_at)
		SELECT 'l' || (i % 20), 'a' || (i % 10), jsonb_build_object('n', i, 'repo', 'service-' || (i % 50)),
			'{"n":' || i || ',"repo":"service-' || (i % 50) || '"}', 0, t, 1, 3,
			CASE WHEN i % 100 < 2 THEN 'failed' WHEN i % 100 = 2 THEN 'cancelled' ELSE 'done' END,
			t, t + interval '6 seconds', t + interval '6 seconds'
		FROM generate_series(1, {{n}}) i, LATERAL (SELECT now() - interval '365 days' + i * interval '{{step}} microseconds') x (t)`,
		`INSERT INTO {{s}}.runs (task_id, lane, agent, attempt, owner, state, pid, started_at, last_heartbeat_at,
			lease_expires_at, finished_at, exit_code, summary, output_tail)
		SELECT id, lane, agent, 1, 'bench', CASE state WHEN 'done' THEN 'completed' WHEN 'failed' THEN 'failed' ELSE 'cancelled' END,
			1000, created_at + interval '1 second', finished_at, finished_at + interval '5 minutes', finished_at,
			CASE state WHEN 'failed' THEN 1 ELSE 0 END, 'ok', 'output of run ' || id
		FROM {{s}}.tasks WHERE state <> 'queued'`,
		// Live work: queued tasks and running runs.
		`INSERT INTO {{s}}.tasks (lane, agent, payload, payload_text, max_attempts, state)
		SELECT 'l' || (i % 20), 'a' || (i % 10), '{}', '{}', 3, 'queued' FROM generate_series(1, 1000) i`,
		`WITH t AS (INSERT INTO {{s}}.tasks (lane, agent, payload, payload_text, attempts, max_attempts, state)
			SELECT 'l' || (i % 20), 'a' || (i % 10), '{}', '{}', 1, 3, 'running' FROM generate_series(1, 40) i RETURNING id, lane, agent)
		INSERT INTO {{s}}.runs (task_id, lane, agent, attempt, owner, state, pid, lease_expires_at)
		SELECT id, lane, agent, 1, 'bench', 'running', 2000, now() + interval '5 minutes' FROM t`,
		`VACUUM ANALYZE {{s}}.tasks`,
		`VACUUM ANALYZE {{s}}.runs`,
	} {
		q = strings.NewReplacer("{{s}}", schema, "{{n}}", fmt.Sprint(benchTasks), "{{step}}", fmt.Sprint(step.Microseconds())).Replace(q)
		if _, err := pool.Exec(ctx, q); err != nil {
			b.Fatalf("fill the history: %v\n%s", err, q)
		}
	}
	b.Logf("filled %s with %d finished tasks and their runs in %s", schema, benchTasks, time.Since(start).Round(time.Second))
	return p, schema
}

// replaceSchema returns u selecting schema instead of its own.
func replaceSchema(tb testing.TB, u, schema string) string {
	tb.Helper()
	parsed, err := url.Parse(u)
	if err != nil {
		tb.Fatal(err)
	}
	q := parsed.Query()
	q.Set("schema", schema)
	parsed.RawQuery = q.Encode()
	return parsed.String()
}
