package bench_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/bench"
	"github.com/qd-run/qd/lease"
)

// MustTestURL returns the test database URL, skipping (or failing under CI)
// when the database cannot be reached.
func MustTestURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("QD_TEST_DATABASE_URL")
	if u == "" {
		u = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("connect to test database %s: %v", lease.Redact(u), err)
		}
		tb.Skipf("test database %s unreachable: %v", lease.Redact(u), err)
	}
	conn.Close(ctx)
	return u
}

func TestRun(t *testing.T) {
	// Ensure a small bench measures every section, every figure is positive
	// where it counts work, every ratio is its figure over the figure it
	// names, and the bench's schemas are gone afterwards.
	u := MustTestURL(t)
	before := benchSchemas(t, u)
	ctx := context.Background()
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: hclog.DefaultOutput, Level: hclog.Warn})
	r, err := bench.Run(ctx, bench.Options{DatabaseURL: u, Size: "small", Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	want := map[string]int{"claim": 18, "claim_many": 24, "cycle": 9, "heartbeat": 19, "depth": 6, "history": 6, "soak": 20}
	got := map[string]int{}
	for _, s := range r.Sections {
		got[s.ID] = len(s.Rows)
		for _, f := range s.Rows {
			checkFigure(t, r, s.ID, f)
		}
	}
	for id, n := range want {
		if got[id] != n {
			t.Errorf("section %s has %d figures, want %d", id, got[id], n)
		}
	}
	for _, k := range [][3]string{
		{"claim", "qd Claim, 16 claimers", "claims_per_second"},
		{"depth", "50,000 queued", "p99_ms"},
		{"history", "100,000 finished", "p99_ms"},
		{"soak", "runs", "hot_update_share"},
	} {
		if f, ok := r.Find(k[0], k[1], k[2]); !ok || f.Target == nil {
			t.Errorf("%v: figure %v has no target", k, f)
		}
	}
	if r.Environment.Postgres == "" || r.Environment.CPUs == 0 {
		t.Errorf("environment not recorded: %+v", r.Environment)
	}
	for name := range benchSchemas(t, u) {
		if !before[name] {
			t.Errorf("schema %s left behind", name)
		}
	}
}

// checkFigure checks one figure of the report.
func checkFigure(t *testing.T, r *bench.Report, section string, f bench.Figure) {
	t.Helper()
	mayBeZero := strings.HasPrefix(f.Metric, "dead_tuples") || f.Metric == "oldest_snapshot_max_s"
	if !mayBeZero && f.Value <= 0 {
		t.Errorf("%s / %s / %s = %v, want > 0", section, f.Case, f.Metric, f.Value)
	}
	if f.Ratio == nil {
		return
	}
	base, ok := r.Find("", f.Ratio.Case, f.Ratio.Metric)
	if !ok {
		t.Errorf("%s / %s / %s: ratio against %q, which is not in the report", section, f.Case, f.Metric, f.Ratio.Against())
		return
	}
	if base.Value != f.Ratio.Base || f.Ratio.Value != f.Value/base.Value {
		t.Errorf("%s / %s / %s: ratio %v of base %v, want %v / %v", section, f.Case, f.Metric, f.Ratio.Value, f.Ratio.Base, f.Value, base.Value)
	}
}

// benchSchemas lists the schemas named like the bench's.
func benchSchemas(t *testing.T, u string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace WHERE nspname LIKE 'qd\_bench\_%'`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, n := range names {
		out[n] = true
	}
	return out
}
