package faults

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// rig is one scenario's world: a migrated schema of its own with an audit
// table, the qd binary, the fake agent and a provider for quick enqueues.
type rig struct {
	t      *testing.T
	qd     string
	url    string // qd's URL (with ?schema=)
	base   string // the database without the schema parameter
	schema string
	pool   *pgxpool.Pool
	prov   *pg.Provider
	agent  string
	dir    string
	// restartKills says the daemons' runs are in cgroups, so a restarted
	// daemon kills what an earlier incarnation's runs left (and waits for
	// the cgroup to empty) before it abandons them: such a run's processes
	// lived no later than its abandonment.
	restartKills bool
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{t: t, qd: testkit.MustBuild(t), agent: fakeAgent.Must(t), dir: t.TempDir()}
	r.url, r.schema = testkit.MustSchema(t)
	r.base = testkit.MustDatabaseURL(t)
	testkit.MustQD(t, r.qd, r.url, "migrate")
	r.pool = testkit.MustPool(t)
	r.exec(`CREATE TABLE ` + r.schema + `.audit (
		task_id bigint, run_id bigint, lane text, attempt int, pid int, event text,
		at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	prov, err := pg.Open(context.Background(), r.url, nil)
	if err != nil {
		t.Fatalf("pg.Open: %v", err)
	}
	t.Cleanup(prov.Close)
	r.prov = prov
	return r
}

func (r *rig) exec(sql string, args ...any) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.pool.Exec(ctx, sql, args...); err != nil {
		r.t.Fatalf("exec %.60s: %v", sql, err)
	}
}

// scalar reads one value.
func (r *rig) scalar(dst any, sql string, args ...any) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.pool.QueryRow(ctx, r.expand(sql), args...).Scan(dst); err != nil {
		r.t.Fatalf("query %.60s: %v", sql, err)
	}
}

// expand replaces {s} with the schema.
func (r *rig) expand(sql string) string { return strings.ReplaceAll(sql, "{s}", r.schema) }

// eachRow runs a query and calls each after scanning every row into dst.
func (r *rig) eachRow(sql string, each func(), dst ...any) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := r.pool.Query(ctx, r.expand(sql))
	if err != nil {
		r.t.Fatalf("query %.60s: %v", sql, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := rows.Scan(dst...); err != nil {
			r.t.Fatalf("scan %.60s: %v", sql, err)
		}
		each()
	}
}

// viaURL returns qd's URL with its host replaced by addr (a proxy).
func (r *rig) viaURL(addr string) string {
	u, err := url.Parse(r.url)
	if err != nil {
		r.t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// agentConf is one agent block of a daemon's config.
type agentConf struct {
	name      string
	lanes     []string
	parallel  int
	lease     string
	heartbeat string
	extra     string // more attributes, as HCL
	env       map[string]string
	command   []string
}

func (r *rig) agentHCL(a agentConf) string {
	if a.lease == "" {
		a.lease = "6s"
	}
	if a.heartbeat == "" {
		a.heartbeat = "1s"
	}
	if a.parallel == 0 {
		a.parallel = 1
	}
	cmd := a.command
	if cmd == nil {
		cmd = []string{r.agent}
	}
	env := map[string]string{"FA_AUDIT_URL": r.base, "FA_AUDIT_TABLE": r.schema + ".audit", "FA_OUT": r.dir}
	for k, v := range a.env {
		env[k] = v
	}
	var b strings.Builder
	fmt.Fprintf(&b, "agent %q {\n  command = %s\n  schedule = \"@every 1s\"\n  parallel = %d\n  lease = %q\n  heartbeat = %q\n  retry_backoff = \"1s\"\n",
		a.name, hclList(cmd), a.parallel, a.lease, a.heartbeat)
	if len(a.lanes) > 0 {
		fmt.Fprintf(&b, "  lanes = %s\n", hclList(a.lanes))
	}
	b.WriteString("  env = {\n")
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "    %s = %q\n", k, env[k])
	}
	b.WriteString("  }\n" + a.extra + "\n}\n")
	return b.String()
}

func hclList(xs []string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = fmt.Sprintf("%q", x)
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// daemon starts `qd run` named name on body (with dbURL, default qd's).
func (r *rig) daemon(name, body string, opt testkit.DaemonOptions, dbURL ...string) *testkit.Daemon {
	r.t.Helper()
	u := r.url
	if len(dbURL) > 0 {
		u = dbURL[0]
	}
	return testkit.StartDaemon(r.t, r.qd, u, name, "shutdown_grace = \"5s\"\n"+body, opt)
}

// enqueue adds a task through the provider and returns its id.
func (r *rig) enqueue(lane, agent, payload string, maxAttempts int) int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	id, _, err := r.prov.Enqueue(ctx, lease.EnqueueParams{Lane: lane, Agent: agent, Payload: []byte(payload), MaxAttempts: maxAttempts})
	if err != nil {
		r.t.Fatalf("enqueue: %v", err)
	}
	return id
}

// taskStates maps every task to its state.
func (r *rig) taskStates() map[int64]string {
	r.t.Helper()
	m := map[int64]string{}
	var id int64
	var st string
	r.eachRow(`SELECT id, state FROM {s}.tasks`, func() { m[id] = st }, &id, &st)
	return m
}

// runState is the state of run id.
func (r *rig) runState(id int64) string {
	r.t.Helper()
	var st string
	r.scalar(&st, `SELECT state FROM {s}.runs WHERE id = $1`, id)
	return st
}

// runsOf counts the runs of task.
func (r *rig) runsOf(task int64) int {
	r.t.Helper()
	var n int
	r.scalar(&n, `SELECT count(*) FROM {s}.runs WHERE task_id = $1`, task)
	return n
}

// waitStates waits until every task is in its wanted state (want[id], else
// def) and returns how many are not when timeout passes.
func (r *rig) waitStates(def string, want map[int64]string, timeout time.Duration) int {
	r.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		bad := 0
		var ex []string
		for id, st := range r.taskStates() {
			w := def
			if s, ok := want[id]; ok {
				w = s
			}
			if st != w {
				bad++
				if len(ex) < 5 {
					ex = append(ex, fmt.Sprintf("task %d is %s, want %s", id, st, w))
				}
			}
		}
		if bad == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			r.t.Errorf("after %s: %d tasks not as expected: %s", timeout, bad, strings.Join(ex, "; "))
			return bad
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitEvent waits until the audit holds an event (for the run, or any run
// when run is 0) and returns the first such row's run id and pid.
func (r *rig) waitEvent(event string, task int64, timeout time.Duration) (runID int64, pid int) {
	r.t.Helper()
	testkit.Eventually(r.t, timeout, fmt.Sprintf("audit event %s of task %d", event, task), func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := r.pool.QueryRow(ctx, r.expand(`SELECT run_id, pid FROM {s}.audit
			WHERE event = $1 AND ($2 = 0 OR task_id = $2) ORDER BY at DESC LIMIT 1`), event, task).Scan(&runID, &pid)
		return err == nil
	})
	return runID, pid
}

// dbNow is the database's clock.
func (r *rig) dbNow() time.Time {
	var t time.Time
	r.scalar(&t, `SELECT clock_timestamp()`)
	return t
}

// waitHeartbeat waits for the first heartbeat or claim by owner after
// since (database clock) and returns the delay.
func (r *rig) waitHeartbeat(owner string, since time.Time, timeout time.Duration) time.Duration {
	r.t.Helper()
	var at time.Time
	testkit.Eventually(r.t, timeout, "a heartbeat of "+owner+" after the fault", func() bool {
		var t *time.Time
		r.scalar(&t, `SELECT min(last_heartbeat_at) FROM {s}.runs WHERE owner = $1 AND last_heartbeat_at > $2`, owner, since)
		if t == nil {
			return false
		}
		at = *t
		return true
	})
	return at.Sub(since)
}

// waitRecovery is waitHeartbeat after a fault ended: the delay is recorded
// as a recovery latency.
func (r *rig) waitRecovery(owner string, since time.Time, timeout time.Duration) time.Duration {
	r.t.Helper()
	d := r.waitHeartbeat(owner, since, timeout)
	fig.recovered(r.t.Name()+" ("+owner+")", d)
	return d
}

// liveAudited lists the fakeagent processes the audit recorded that are
// still alive.
func (r *rig) liveAudited() []int {
	r.t.Helper()
	var live []int
	var pid int
	r.eachRow(`SELECT DISTINCT pid FROM {s}.audit WHERE event IN ('start', 'spawn')`, func() {
		if isFakeAgent(pid) {
			live = append(live, pid)
		}
	}, &pid)
	return live
}

// isFakeAgent reports whether pid is a live fakeagent process.
func isFakeAgent(pid int) bool {
	if !testkit.Alive(pid) {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(b), "fakeagent")
}
