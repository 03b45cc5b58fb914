package bench_test

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/bench"
	"github.com/qd-run/qd/internal/testkit"
)

// MustTestURL returns the test database URL, skipping (or failing under CI)
// when the database cannot be reached.
func MustTestURL(tb testing.TB) string {
	tb.Helper()
	return testkit.MustDatabaseURL(tb)
}

func TestRun(t *testing.T) {
	// Ensure a small bench measures every section, every figure is positive
	// where it counts work, every ratio is its figure over the figure it
	// names, and the bench's schemas, databases and daemons are gone
	// afterwards.
	u := MustTestURL(t)
	id := "t" + strconv.Itoa(os.Getpid())
	qd := testkit.MustBuild(t)
	ctx := context.Background()
	logger := hclog.New(&hclog.LoggerOptions{Name: t.Name(), Output: hclog.DefaultOutput, Level: hclog.Warn})
	r, err := bench.Run(ctx, bench.Options{DatabaseURL: u, Size: "small", Logger: logger, QD: qd, ID: id, River: "river"})
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + text.String())
	want := map[string]int{"claim": 18, "claim_many": 24, "claim_limit": 8, "any_lane": 6, "cycle": 9, "heartbeat": 19, "depth": 6, "history": 6, "soak": 20, "e2e": 37, "idle": 17, "fleet": 24, "children": 18}
	got := map[string]int{}
	for _, s := range r.Sections {
		if s.ID == "e2e" && strings.Contains(s.Shape, "River not measured") {
			t.Logf("the River peer was left out: %s", s.Shape)
			want["e2e"] -= 8 + 2 // its eight figures, and the two ratios to it
		}
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
		{"claim_many", "ClaimMany(8), any lane, 16 claimers", "tasks_per_second"},
		{"any_lane", "ClaimMany(8), any lane, 10,000 lanes", "p99_ms"},
		{"claim_limit", "qd Claim through a limit, 1 claimer", "p50_ms"},
		{"history", "100,000 finished", "p99_ms"},
		{"soak", "runs", "hot_update_share"},
		{"e2e", "qd run, 64 lanes of limit 1", "tasks_per_second"},
		{"e2e", "qd run, one lane of limit 32", "cpu_ms_per_task"},
		{"e2e", "qd run, 64 lanes of limit 1", "busy_percent"},
		{"e2e", "32 tasks claimable at a tick", "tick_to_exec_p50_ms"},
		{"idle", "50 agents ticking every second", "transactions_per_agent_tick"},
		{"idle", "50 agents ticking every second", "daemon_cpu_percent"},
		{"idle", "50 agents ticking every second", "rss_mib"},
		{"fleet", "4 daemons × 10 children", "transactions_per_child_minute"},
		{"fleet", "4 daemons × 10 children", "runs_lost"},
		{"fleet", "4 daemons × 10 children", "min_lease_left_seconds"},
	} {
		if f, ok := r.Find(k[0], k[1], k[2]); !ok || f.Target == nil {
			t.Errorf("%v: figure %v has no target", k, f)
		}
	}
	// A larger fleet's cost per child is set against the smallest's.
	if f, ok := r.Find("fleet", "4 daemons × 10 children", "transactions_per_child_minute"); !ok || f.Ratio == nil ||
		f.Ratio.Case != "2 daemons × 10 children" {
		t.Errorf("the fleet's cost per child is not set against the smallest fleet's: %+v", f)
	}
	// The daemon's tick to exec is set against the plain loop's, started
	// at the same kind of tick on the same machine.
	if f, ok := r.Find("e2e", "32 tasks claimable at a tick", "tick_to_exec_p99_ms"); !ok || f.Ratio == nil ||
		f.Ratio.Case != "fork-exec loop, 32 started at a tick" || f.Ratio.Metric != "tick_to_exec_p99_ms" {
		t.Errorf("tick to exec p99 is not set against the loop's: %+v", f)
	}
	// qd's own share of a task (daemon and backends) is held to River's,
	// measured by the River peer itself.
	if f, ok := r.Find("e2e", "qd run, 64 lanes of limit 1", "own_cpu_ms_per_task"); !ok {
		t.Errorf("no own_cpu_ms_per_task for qd over 64 lanes")
	} else if _, river := r.Find("e2e", "River v0.51.2, exec worker, MaxWorkers 32", "own_cpu_ms_per_task"); river &&
		(f.Ratio == nil || f.Target == nil || f.Ratio.Metric != "own_cpu_ms_per_task") {
		t.Errorf("qd's own share is not set against River's: %+v", f)
	}
	if r.Environment.Postgres == "" || r.Environment.CPUs == 0 {
		t.Errorf("environment not recorded: %+v", r.Environment)
	}
	for _, name := range benchSchemas(t, u, id) {
		t.Errorf("schema %s left behind", name)
	}
	for _, name := range benchDatabases(t, u, id) {
		t.Errorf("database %s left behind", name)
	}
	if pids := running(t, qd); len(pids) > 0 {
		t.Errorf("daemons left running: pids %v", pids)
	}
}

// running lists the processes running the program at path.
func running(t *testing.T, path string) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc here")
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		exe, err := os.Readlink("/proc/" + e.Name() + "/exe")
		if err == nil && exe == path {
			pids = append(pids, pid)
		}
	}
	return pids
}

// benchDatabases lists the databases of the bench run id.
func benchDatabases(t *testing.T, u, id string) []string {
	return benchNames(t, u, `SELECT datname FROM pg_database WHERE datname LIKE $1`, id)
}

// benchSchemas lists the schemas of the bench run id.
func benchSchemas(t *testing.T, u, id string) []string {
	return benchNames(t, u, `SELECT nspname FROM pg_namespace WHERE nspname LIKE $1`, id)
}

// benchNames runs query with the name pattern of the bench run id.
func benchNames(t *testing.T, u, query, id string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, query, `qd\_bench\_`+id+`\_%`)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// checkFigure checks one figure of the report.
func checkFigure(t *testing.T, r *bench.Report, section string, f bench.Figure) {
	t.Helper()
	// CPU is counted in steps of 10 ms, which an idle daemon may not reach
	// in the small size.
	mayBeZero := strings.HasPrefix(f.Metric, "dead_tuples") || f.Metric == "oldest_snapshot_max_s" ||
		section == "idle" && (strings.Contains(f.Metric, "cpu") || strings.HasPrefix(f.Metric, "postgres_")) ||
		section == "fleet" && (strings.Contains(f.Metric, "cpu") || f.Metric == "runs_lost") ||
		// An idle daemon may sleep through the small size's whole window.
		strings.Contains(f.Metric, "wakeups") ||
		// A lease renewed on time lags by nothing.
		section == "children" && (strings.Contains(f.Metric, "cpu") || strings.HasPrefix(f.Metric, "lease_lag"))
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

// Ensure Run refuses to start without a qd binary to run as the daemon.
func TestRun_NoQD(t *testing.T) {
	r, err := bench.Run(context.Background(), bench.Options{DatabaseURL: "postgres:///unused"})
	if r != nil || err == nil || !strings.Contains(err.Error(), "Options.QD") {
		t.Errorf("Run without QD = %v, %v; want no report and an error naming Options.QD", r, err)
	}
}
