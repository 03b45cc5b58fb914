package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// bouncer is a PgBouncer of the test's own, in transaction pooling mode,
// in front of the test database.
type bouncer struct {
	addr string
	log  *testkit.SyncBuffer
}

// startBouncer starts pgbouncer on a free port with at most servers
// server connections to the database at target (host:port). It skips the
// test when pgbouncer is not installed, unless CI is set.
func startBouncer(t *testing.T, servers int, target string) *bouncer {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("pgbouncer is not installed (.ci/run installs it): %v", err)
			}
			t.Skipf("pgbouncer is not installed (apt-get install pgbouncer): %v", err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	// pgbouncer refuses to run as root and drops to another user, which
	// must be able to read its files.
	dir, err := os.MkdirTemp("", "qd-pgbouncer-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	host, tport, err := net.SplitHostPort(target)
	if err != nil {
		t.Fatal(err)
	}
	ini := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = 127.0.0.1
listen_port = %d
unix_socket_dir =
auth_type = trust
auth_file = %s
admin_users = postgres
pool_mode = transaction
default_pool_size = %d
max_db_connections = %d
max_client_conn = 1000
stats_period = 1
`, host, tport, port, filepath.Join(dir, "users.txt"), servers, servers)
	for name, body := range map[string]string{"pgbouncer.ini": ini, "users.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", unprivileged()}, args...)
	}
	b := &bouncer{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), log: &testkit.SyncBuffer{}}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = b.log, b.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pgbouncer: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	testkit.Eventually(t, 10*time.Second, "pgbouncer to listen on "+b.addr, func() bool {
		c, err := net.DialTimeout("tcp", b.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return b
}

// unprivileged names the user pgbouncer drops to when started as root.
func unprivileged() string {
	for _, name := range []string{"postgres", "qd"} {
		if _, err := user.Lookup(name); err == nil {
			return name
		}
	}
	return "nobody"
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// poolStats is what the admin console's SHOW POOLS and SHOW STATS said
// over a run: the most server connections and waiting clients at once,
// and the transactions carried.
type poolStats struct {
	mu                   sync.Mutex
	maxServers, maxWait  int
	maxClients, samples  int
	xacts, queries, errs int64
}

// watch samples the pooler's admin console until stop is called.
func (b *bouncer) watch(t *testing.T, db string) (*poolStats, func()) {
	t.Helper()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, "postgres://postgres@"+b.addr+"/pgbouncer?sslmode=disable&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatalf("connect to the pgbouncer console: %v\n%s", err, b.log.String())
	}
	st := &poolStats{}
	stop := poll(200*time.Millisecond, func() {
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		for _, row := range showRows(ctx, admin, "SHOW POOLS") {
			if row["database"] != db {
				continue
			}
			n := func(k string) int { v, _ := strconv.Atoi(row[k]); return v }
			st.mu.Lock()
			st.samples++
			st.maxServers = max(st.maxServers, n("sv_active")+n("sv_idle")+n("sv_used")+n("sv_tested")+n("sv_login"))
			st.maxWait = max(st.maxWait, n("cl_waiting"))
			st.maxClients = max(st.maxClients, n("cl_active")+n("cl_waiting"))
			st.mu.Unlock()
		}
	})
	return st, func() {
		stop()
		time.Sleep(1200 * time.Millisecond) // stats_period: the totals are refreshed each second
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		for _, row := range showRows(ctx, admin, "SHOW STATS") {
			if row["database"] == db {
				st.xacts, _ = strconv.ParseInt(row["total_xact_count"], 10, 64)
				st.queries, _ = strconv.ParseInt(row["total_query_count"], 10, 64)
			}
		}
		admin.Close(ctx)
	}
}

// showRows runs an admin console command and returns its rows by column.
func showRows(ctx context.Context, conn *pgx.Conn, cmd string) []map[string]string {
	rows, err := conn.Query(ctx, cmd)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []map[string]string
	for rows.Next() {
		// The simple protocol answers in text, whatever the column's type.
		row := map[string]string{}
		for i, fd := range rows.FieldDescriptions() {
			row[fd.Name] = string(rows.RawValues()[i])
		}
		out = append(out, row)
	}
	return out
}

// withParam returns u with one more query parameter.
func withParam(t *testing.T, u, k, v string) string {
	t.Helper()
	p, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	q := p.Query()
	q.Set(k, v)
	p.RawQuery = q.Encode()
	return p.String()
}

// Ensure twenty daemons and the CLI, every one of them through a PgBouncer
// in transaction pooling with ten server connections, run a few hundred
// tasks over lanes with limits 1 to 3 with every invariant of the suite
// kept; and that a URL that does not say pooler=transaction is told to.
func TestPooler_TwentyDaemons(t *testing.T) {
	const servers, daemons, lanes = 10, 20, 30
	r := newRig(t)
	rnd := rng(t)
	b := startBouncer(t, servers, "127.0.0.1:5432")
	db := strings.TrimPrefix(mustURL(t, r.url).Path, "/")
	pooled := withParam(t, r.viaURL(b.addr), "pooler", "transaction")
	for i := range lanes {
		r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ($1, $2)`, r.schema), fmt.Sprintf("p%02d", i), 1+i%3)
	}
	// A migration through the pooler, of a schema of its own: one
	// transaction, no named statements.
	fresh, _ := testkit.MustSchema(t)
	fu := mustURL(t, fresh)
	fu.Host = b.addr
	if out := testkit.MustQD(t, r.qd, withParam(t, fu.String(), "pooler", "transaction"), "migrate"); !strings.Contains(out, "migrated from version 0") {
		t.Errorf("qd migrate through the pooler: %q", out)
	}
	prov, err := pg.Open(context.Background(), pooled, nil)
	if err != nil {
		t.Fatalf("pg.Open through the pooler: %v", err)
	}
	t.Cleanup(prov.Close)
	// Most runs are short; one in ten lasts a few heartbeats.
	payload := func() string {
		ms := 100 + rnd.IntN(500)
		if rnd.IntN(10) == 0 {
			ms = 2500 + rnd.IntN(1000)
		}
		return fmt.Sprintf(`{"mode":"sleep","ms":%d}`, ms)
	}
	enqueue := func(n int) {
		for range n {
			_, _, err := prov.Enqueue(context.Background(), lease.EnqueueParams{
				Lane: fmt.Sprintf("p%02d", rnd.IntN(lanes)), Agent: "w", Payload: []byte(payload()), MaxAttempts: 3})
			if err != nil {
				t.Fatalf("enqueue through the pooler: %v", err)
			}
		}
	}
	stats, stopWatch := b.watch(t, db)
	enqueue(100)
	began := time.Now()
	body := r.agentHCL(agentConf{name: "w", parallel: 3, lease: "8s", heartbeat: "1s"})
	ds := make([]*testkit.Daemon, daemons)
	for i := range ds {
		ds[i] = r.daemon(fmt.Sprintf("pool-%02d", i), body, testkit.DaemonOptions{}, pooled)
	}
	enqueue(160)
	for range 40 {
		testkit.MustQD(t, r.qd, pooled, "enqueue", "--lane", fmt.Sprintf("p%02d", rnd.IntN(lanes)), "--agent", "w", payload())
	}
	cancelled := map[int64]string{}
	for range 10 {
		out := testkit.MustQD(t, r.qd, pooled, "enqueue", "--lane", "p00", "--agent", "w", "--in", "1h", "{}")
		id, err := strconv.ParseInt(strings.TrimSpace(out), 10, 64)
		if err != nil {
			t.Fatalf("qd enqueue printed %q, want a task id", out)
		}
		testkit.MustQD(t, r.qd, pooled, "cancel", strconv.FormatInt(id, 10))
		cancelled[id] = "cancelled"
	}
	for _, d := range ds[:3] {
		if out := testkit.MustQD(t, r.qd, pooled, "status", "--socket", d.Socket); !strings.Contains(out, "p0") {
			t.Errorf("qd status of %s through the pooler shows no lane:\n%s", d.Name, out)
		}
	}
	r.verify(expect{states: cancelled, timeout: 3 * time.Minute})
	took := time.Since(began)
	stopWatch()

	var done []json.RawMessage
	out := testkit.MustQD(t, r.qd, pooled, "tasks", "--state", "done", "--limit", "1000", "--json")
	if err := json.Unmarshal([]byte(out), &done); err != nil || len(done) != 300 {
		t.Errorf("qd tasks --state done through the pooler: %d tasks (%v), want 300", len(done), err)
	}
	var maxAttempts int
	r.scalar(&maxAttempts, `SELECT max(attempts) FROM {s}.tasks WHERE state = 'done'`)
	if maxAttempts != 1 {
		t.Errorf("a task took %d attempts behind the pooler with no fault injected", maxAttempts)
	}
	var beaten int
	r.scalar(&beaten, `SELECT count(*) FROM {s}.runs WHERE last_heartbeat_at > started_at + interval '500 milliseconds'`)
	if beaten == 0 {
		t.Errorf("no run was heartbeaten through the pooler")
	}
	claimFailed := 0
	for _, d := range ds {
		if strings.Contains(d.Log(), "prepared statement") {
			t.Errorf("daemon %s met a prepared statement error behind the pooler:\n%s", d.Name, d.Log())
		}
		claimFailed += strings.Count(d.Log(), "claim failed")
	}
	if stats.maxServers > servers {
		t.Errorf("the pooler held %d server connections, more than its %d", stats.maxServers, servers)
	}
	if stats.samples == 0 {
		t.Errorf("the pooler's console never answered SHOW POOLS\n%s", b.log.String())
	}
	t.Logf("pgbouncer %s, transaction pooling, %d server connections: %d daemons and the CLI ran 300 tasks (+10 cancelled) over %d lanes in %s; "+
		"at most %d server connections, %d clients, %d waiting; %d transactions, %d queries; %d runs heartbeaten; %d failed claims logged",
		bouncerVersion(), servers, daemons, lanes, took.Round(100*time.Millisecond),
		stats.maxServers, stats.maxClients, stats.maxWait, stats.xacts, stats.queries, beaten, claimFailed)

	// Without pooler=transaction, pgx's named prepared statements meet
	// each other on the pooler's server connections: the error says what
	// to add to the URL.
	bare := r.viaURL(b.addr)
	failed := 0
	for range 6 {
		_, errOut, code := testkit.QD(t, r.qd, bare, "tasks", "--limit", "1")
		if code == 0 {
			continue
		}
		failed++
		if !strings.Contains(errOut, "pooler=transaction") {
			t.Errorf("qd tasks through the pooler without pooler=transaction: exit %d, %q; want the hint to add it", code, errOut)
		}
	}
	if failed == 0 {
		t.Logf("no prepared statement clash in 6 runs without pooler=transaction")
	}
	t.Logf("without pooler=transaction: %d of 6 runs of qd tasks failed, each naming pooler=transaction", failed)
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// bouncerVersion is pgbouncer's version line, for the figures.
func bouncerVersion() string {
	out, err := exec.Command("pgbouncer", "--version").Output()
	if err != nil {
		return "(version unknown)"
	}
	first, _, _ := strings.Cut(string(out), "\n")
	return strings.TrimPrefix(first, "PgBouncer ")
}

// Ensure the idempotent claim holds behind the pooler: when the reply to a
// claim's COMMIT is lost between PgBouncer and the server, PgBouncer's
// error makes qd ask again with the claim's token, and the task runs once,
// with one run and one attempt.
func TestPooler_ClaimCommitReplyLost(t *testing.T) {
	r := newRig(t)
	px := newProxy(t, "127.0.0.1:5432")
	b := startBouncer(t, 2, px.Addr())
	pooled := withParam(t, r.viaURL(b.addr), "pooler", "transaction")
	marker := "poolcut-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	id := r.enqueue("pc", "w", `{"mode":"sleep","ms":100,"marker":"`+marker+`"}`, 3)
	cut := px.LoseCommitAfter(marker)
	d := r.daemon("poolcut", r.agentHCL(agentConf{name: "w", lease: "4s", heartbeat: "1s"}), testkit.DaemonOptions{}, pooled)
	waitLostCommit(t, cut, d, "the claim's")
	r.verify(expect{})
	var attempts, starts int
	r.scalar(&attempts, `SELECT attempts FROM {s}.tasks WHERE id = $1`, id)
	r.scalar(&starts, `SELECT count(*) FROM {s}.audit WHERE task_id = $1 AND event = 'start'`, id)
	if runs := r.runsOf(id); attempts != 1 || runs != 1 || starts != 1 {
		t.Errorf("task %d after its claim's reply was lost behind the pooler: %d attempts, %d runs, %d agent starts; want 1, 1, 1\n%s\npgbouncer:\n%s",
			id, attempts, runs, starts, d.Log(), b.log.String())
	}
	d.WaitLog(t, "claim retried with its token", time.Second)
	t.Logf("%s", grepLines(d.Log(), "claim outcome unknown"))
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
