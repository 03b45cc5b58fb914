package faults

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/url"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// dbSwitch is a PostgreSQL proxy that sends every connection to the
// database it currently names, whatever database the client asked for: a
// failover seen by the client, whose URL does not change while the server
// behind it does. It rewrites the startup message's database parameter.
type dbSwitch struct {
	ln     net.Listener
	server string // host:port of the PostgreSQL server

	mu    sync.Mutex
	db    string
	conns map[net.Conn]net.Conn
}

func newDBSwitch(t *testing.T, server, db string) *dbSwitch {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("switch listen: %v", err)
	}
	s := &dbSwitch{ln: ln, server: server, db: db, conns: map[net.Conn]net.Conn{}}
	go s.accept()
	t.Cleanup(func() {
		ln.Close()
		s.cut()
	})
	return s
}

func (s *dbSwitch) Addr() string { return s.ln.Addr().String() }

// Switch sends new connections to db and cuts the open ones, as the old
// server's going away would.
func (s *dbSwitch) Switch(db string) {
	s.mu.Lock()
	s.db = db
	s.mu.Unlock()
	s.cut()
}

func (s *dbSwitch) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c, srv := range s.conns {
		c.Close()
		srv.Close()
		delete(s.conns, c)
	}
}

func (s *dbSwitch) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		go s.serve(c)
	}
}

// serve reads the client's startup message (answering an SSL or GSS
// encryption request with "no"), names the current database in it and
// pipes the connection to the server.
func (s *dbSwitch) serve(c net.Conn) {
	var msg []byte
	for {
		var hdr [8]byte
		if _, err := io.ReadFull(c, hdr[:]); err != nil {
			c.Close()
			return
		}
		n := binary.BigEndian.Uint32(hdr[:4])
		code := binary.BigEndian.Uint32(hdr[4:])
		if n == 8 && (code == 80877103 || code == 80877104) { // SSLRequest, GSSENCRequest
			if _, err := c.Write([]byte{'N'}); err != nil {
				c.Close()
				return
			}
			continue
		}
		if n < 8 || n > 10000 {
			c.Close()
			return
		}
		rest := make([]byte, n-8)
		if _, err := io.ReadFull(c, rest); err != nil {
			c.Close()
			return
		}
		msg = append(hdr[:], rest...)
		break
	}
	s.mu.Lock()
	db := s.db
	s.mu.Unlock()
	msg = withDatabase(msg, db)
	srv, err := net.DialTimeout("tcp", s.server, 5*time.Second)
	if err != nil {
		c.Close()
		return
	}
	if _, err := srv.Write(msg); err != nil {
		c.Close()
		srv.Close()
		return
	}
	s.mu.Lock()
	s.conns[c] = srv
	s.mu.Unlock()
	go func() { _, _ = io.Copy(srv, c); srv.Close() }()
	_, _ = io.Copy(c, srv)
	c.Close()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// withDatabase rewrites a startup message's database parameter.
func withDatabase(msg []byte, db string) []byte {
	params := bytes.Split(msg[8:len(msg)-1], []byte{0})
	out := append([]byte{}, msg[4:8]...)
	seen := false
	for i := 0; i+1 < len(params); i += 2 {
		k, v := params[i], params[i+1]
		if string(k) == "database" {
			v, seen = []byte(db), true
		}
		out = append(append(append(append(out, k...), 0), v...), 0)
	}
	if !seen {
		out = append(append(append(out, "database"...), 0), append([]byte(db), 0)...)
	}
	out = append(out, 0)
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(out)+4)), out...)
}

// receipt is an enqueue's answer: the task id and the payload's marker.
type receipt struct {
	id     int64
	marker string
}

// Ensure a failover to a restored copy a few seconds behind, under two
// running daemons, loses nothing the copy holds, and never runs two copies
// of a task at once: runs the copy does not know (claimed after it was
// taken) are stopped by their heartbeats, runs it still shows live but that
// had ended are reaped when their leases run out and run again, and no
// stale write lands on the copy. Tasks enqueued after the copy was taken
// are lost by the restore itself: they are counted apart, by their
// receipts.
func TestFailover_RestoredCopyBehind(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	base, err := url.Parse(r.base)
	if err != nil {
		t.Fatal(err)
	}
	origDB := strings.TrimPrefix(base.Path, "/")
	sw := newDBSwitch(t, base.Host, origDB)
	qdURL := r.viaURL(sw.Addr())

	marker := 0
	enqueue := func(prov *pg.Provider, lane, payload string, priority ...int) receipt {
		t.Helper()
		marker++
		m := fmt.Sprintf("fo-%d", marker)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		id, _, err := prov.Enqueue(ctx, lease.EnqueueParams{Lane: lane, Agent: "w", MaxAttempts: 5, Priority: append(priority, 0)[0],
			Payload: []byte(strings.Replace(payload, "}", `,"marker":"`+m+`"}`, 1))})
		if err != nil {
			t.Fatalf("enqueue: %v", err)
		}
		return receipt{id, m}
	}
	var before, after, later []receipt
	for i := range 12 {
		before = append(before, enqueue(r.prov, fmt.Sprintf("fo%d", i%4), `{"mode":"sleep","ms":1200}`))
	}
	body := r.agentHCL(agentConf{name: "w", parallel: 3, lease: "4s", heartbeat: "1s"})
	daemons := []*testkit.Daemon{
		r.daemon("failover-a", body, testkit.DaemonOptions{}, qdURL),
		r.daemon("failover-b", body, testkit.DaemonOptions{}, qdURL),
	}
	testkit.Eventually(t, 30*time.Second, "the first tasks done", func() bool {
		var n int
		r.scalar(&n, `SELECT count(*) FROM {s}.tasks WHERE state = 'done'`)
		return n >= 4
	})

	// The copy, taken at T while the daemons run.
	dump := filepath.Join(r.dir, "copy.dump")
	taken := r.dbNow()
	if out, err := exec.Command("pg_dump", "--format=custom", "--file="+dump, "--schema="+r.schema,
		"--exclude-table="+r.schema+".audit", r.base).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	for i := range 4 {
		after = append(after, enqueue(r.prov, fmt.Sprintf("fo%d", i), `{"mode":"sleep","ms":500}`))
	}
	// Two that still run at the switch, next in their lanes: their runs,
	// like their tasks, are unknown to the copy, which has other tasks
	// queued in those lanes.
	for i := range 2 {
		after = append(after, enqueue(r.prov, fmt.Sprintf("fo%d", i), `{"mode":"sleep","ms":6000}`, -1))
	}
	copyDB := "qdfo_" + r.schema
	r.exec(`DROP DATABASE IF EXISTS ` + copyDB)
	r.exec(`CREATE DATABASE ` + copyDB)
	oldPool := r.pool
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := oldPool.Exec(ctx, `DROP DATABASE IF EXISTS `+copyDB+` WITH (FORCE)`); err != nil {
			t.Errorf("drop the copy: %v", err)
		}
	})
	copyURL := *base
	copyURL.Path = "/" + copyDB
	if out, err := exec.Command("pg_restore", "--dbname="+copyURL.String(), dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	// Work goes on against the old server for a few seconds after T.
	time.Sleep(time.Until(taken.Add(3 * time.Second)))
	var ranAfter int
	r.scalar(&ranAfter, `SELECT count(*) FROM {s}.runs WHERE started_at > $1`, taken)
	var lostRuns []int64
	var lostRun int64
	r.eachRow(`SELECT id FROM {s}.runs WHERE started_at > '`+taken.Format(time.RFC3339Nano)+`'`, func() { lostRuns = append(lostRuns, lostRun) }, &lostRun)
	sw.Switch(copyDB)
	switched := time.Now()
	fig.fault("failover-to-restored-copy", 1)
	t.Logf("copy taken; %d runs started on the old server after it; switched %s after T", ranAfter, switched.Sub(taken).Round(time.Millisecond))

	// From here the world is the copy: enqueue there, check there.
	cu := copyURL
	q := cu.Query()
	q.Set("schema", r.schema)
	cu.RawQuery = q.Encode()
	copyProv, err := pg.Open(context.Background(), cu.String(), nil)
	if err != nil {
		t.Fatalf("pg.Open copy: %v", err)
	}
	t.Cleanup(copyProv.Close)
	for i := range 4 {
		later = append(later, enqueue(copyProv, fmt.Sprintf("fo%d", i), `{"mode":"sleep","ms":500}`))
	}
	copyPool, err := pgxpool.New(context.Background(), copyURL.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(copyPool.Close)
	r.pool = copyPool
	r.waitStates("done", nil, 60*time.Second)
	killed, givenBack := 0, 0
	for _, d := range daemons {
		log := d.Log()
		if !strings.Contains(log, "the database server changed under qd") {
			t.Errorf("daemon %s did not notice the change of server", d.Name)
		}
		if db := d.Status(t).Database; db.ServerChangedAt.IsZero() || !db.ClaimsHeldUntil.After(db.ServerChangedAt) {
			t.Errorf("qd status of %s does not show the change of server: %+v", d.Name, db)
		}
		killed += strings.Count(log, "lease lost; killed the child's group")
	}
	r.scalar(&givenBack, `SELECT count(*) FROM {s}.runs WHERE summary LIKE 'given back unstarted: the database server changed%'`)
	t.Logf("after the switch: %d children killed as their runs were lost, %d claimed runs given back during the wait", killed, givenBack)
	var reissued int
	r.scalar(&reissued, `SELECT count(*) FROM {s}.runs WHERE id = ANY($1)`, lostRuns)
	t.Logf("%d of the %d run ids the old server gave out after the copy was taken were given out again by the copy", reissued, len(lostRuns))
	if killed == 0 {
		t.Errorf("no child was killed after the switch, though two ran tasks the copy does not know")
	}
	if reissued == 0 {
		t.Errorf("the copy gave out none of the lost runs' ids again: the scenario did not test fencing across reissued ids")
	}

	// The copy's tasks are by their receipts: those enqueued after T are
	// not in it (their ids may name other tasks now).
	lostByRestore := 0
	for _, rc := range after {
		var n int
		r.scalar(&n, `SELECT count(*) FROM {s}.tasks WHERE payload->>'marker' = $1`, rc.marker)
		if n == 0 {
			lostByRestore++
			var other string
			r.scalar(&other, `SELECT coalesce((SELECT payload->>'marker' FROM {s}.tasks WHERE id = $1), '')`, rc.id)
			t.Logf("task %d (%s) enqueued after the copy was taken is not in it; id %d now names %q", rc.id, rc.marker, rc.id, other)
		}
	}
	for _, rc := range append(append([]receipt{}, before...), later...) {
		var st string
		r.scalar(&st, `SELECT coalesce((SELECT state FROM {s}.tasks WHERE payload->>'marker' = $1), 'missing')`, rc.marker)
		if st != "done" {
			t.Errorf("task %s (receipt id %d) is %s in the copy, want done", rc.marker, rc.id, st)
		}
	}
	fig.add(func(f *figures) { f.restoreLost += lostByRestore })

	// The audit is the world's record, kept on the old server: bring it
	// over for the checks.
	time.Sleep(500 * time.Millisecond)
	copyAudit(t, oldPool, copyPool, r.schema)
	r.verify(expect{})
	// A run id given out again must not have taken another run's outcome:
	// each completed run's summary names its own task's marker.
	var foreign int
	r.scalar(&foreign, `SELECT count(*) FROM {s}.runs r JOIN {s}.tasks t ON t.id = r.task_id
		WHERE r.state = 'completed' AND r.summary <> 'fakeagent done ' || (t.payload->>'marker')`)
	if foreign > 0 {
		t.Errorf("%d runs in the copy were completed by the work of another task (a stale settlement on a reissued run id)", foreign)
		fig.add(func(f *figures) { f.staleApplied += foreign })
	}
	if t.Failed() {
		for _, sp := range r.spans() {
			t.Logf("span: task %d run %d lane %s %s..%s ended %v settled %s", sp.task, sp.run, sp.lane,
				sp.start.Format("05.000"), sp.end().Format("05.000"), sp.ended, sp.settled.Format("05.000"))
		}
		t.Logf("switched at %s", switched.Format("05.000"))
	}
}

// copyAudit copies the audit table of schema from one database to another.
func copyAudit(t *testing.T, from, to *pgxpool.Pool, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := to.Exec(ctx, `CREATE TABLE `+schema+`.audit (
		task_id bigint, run_id bigint, lane text, attempt int, pid int, event text,
		at timestamptz NOT NULL)`); err != nil {
		t.Fatalf("create audit in the copy: %v", err)
	}
	rows, err := from.Query(ctx, `SELECT task_id, run_id, lane, attempt, pid, event, at FROM `+schema+`.audit`)
	if err != nil {
		t.Fatal(err)
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) ([]any, error) { return row.Values() })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := to.CopyFrom(ctx, pgx.Identifier{schema, "audit"},
		[]string{"task_id", "run_id", "lane", "attempt", "pid", "event", "at"}, pgx.CopyFromRows(all)); err != nil {
		t.Fatalf("copy audit: %v", err)
	}
}
