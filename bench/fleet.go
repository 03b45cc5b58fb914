package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/internal/localpg"
)

// fleetShape is the fleet measured at one bench size: for each number of
// daemons, each holding Children live children, the database is watched
// for Window after Warmup once every child is alive.
type fleetShape struct {
	Daemons        []int
	Children       int
	Window, Warmup time.Duration
}

var fleetShapes = map[string]fleetShape{
	"small": {Daemons: []int{2, 4}, Children: 10, Window: 4 * time.Second, Warmup: 2 * time.Second},
	"full":  {Daemons: []int{10, 50, 100}, Children: 100, Window: 60 * time.Second, Warmup: 15 * time.Second},
}

// fleetLanes is how many lanes the fleet's tasks are spread over; each
// holds a share of them, so that daemons meet in the lanes' locks.
const fleetLanes = 10

// fleetLease is the lease of the fleet's agent (heartbeats every third of
// it).
const fleetLease = 30 * time.Second

// fleetResult is what one fleet cost over its window.
type fleetResult struct {
	daemons, children int
	fill              time.Duration // from the first daemon's start to every child alive, or to fleetFill
	alive             int           // children alive when the window began
	wall              time.Duration
	xacts             int64
	server            time.Duration // CPU of every process of the server
	daemonsCPU        time.Duration
	rss               int64 // the daemons' memory, summed
	minLeaseLeft      time.Duration
	lost              int64 // runs that ended during the window: none should
	perDaemon         [2]int
}

// fleet measures what a growing fleet of daemons, each holding the same
// number of live `sleep` children, costs the database, on a private
// cluster of its own (the server's default max_connections of 100 holds
// no fleet of 100 daemons, and only the fleet counts in its CPU).
func (b *runner) fleet(ctx context.Context) error {
	shape := fleetShapes[b.sc.Name]
	dir, err := os.MkdirTemp("", "qd-bench-fleet-")
	if err != nil {
		return fmt.Errorf("create fleet directory: %w", err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil { // the server may run as another user
		return fmt.Errorf("open fleet directory: %w", err)
	}
	cluster := localpg.New(filepath.Join(dir, "pg"), localpg.Options{})
	dbURL, err := b.fleetServer(ctx, cluster, 8*slices.Max(shape.Daemons)+20)
	if err != nil {
		return err
	}
	defer func() {
		if _, err := cluster.Stop(context.WithoutCancel(ctx), localpg.Immediate); err != nil {
			b.log.Warn("stop the fleet's cluster", "dir", cluster.Dir(), "error", err)
		}
	}()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		return fmt.Errorf("find the program sleep: %w", err)
	}
	fb := *b
	fb.o.DatabaseURL = dbURL
	var base *fleetResult
	for _, n := range shape.Daemons {
		r, err := fb.fleetOf(ctx, filepath.Join(cluster.Dir(), "data"), sleep, n, shape)
		if err != nil {
			return fmt.Errorf("fleet of %d daemons: %w", n, err)
		}
		b.fleetFigures(shape, r, base)
		if base == nil {
			base = &r
		}
	}
	return nil
}

// fleetServer starts the cluster, raises its max_connections to conns
// and starts it again, and returns its URL.
func (b *runner) fleetServer(ctx context.Context, c *localpg.Cluster, conns int) (string, error) {
	res, err := c.Start(ctx)
	if err != nil {
		return "", fmt.Errorf("start the fleet's private cluster: %w", err)
	}
	conn, err := pgx.Connect(ctx, res.URL)
	if err != nil {
		return "", fmt.Errorf("connect to the fleet's cluster: %w", err)
	}
	_, err = conn.Exec(ctx, "ALTER SYSTEM SET max_connections = "+strconv.Itoa(conns))
	conn.Close(ctx)
	if err != nil {
		return "", fmt.Errorf("raise max_connections of the fleet's cluster: %w", err)
	}
	if _, err := c.Stop(ctx, localpg.Immediate); err != nil {
		return "", fmt.Errorf("restart the fleet's cluster: %w", err)
	}
	if res, err = c.Start(ctx); err != nil {
		return "", fmt.Errorf("restart the fleet's cluster: %w", err)
	}
	b.log.Info("fleet cluster", "dir", c.Dir(), "max_connections", conns)
	return res.URL, nil
}

// fleetOf runs n daemons with shape.Children children each and measures
// them once every child is alive.
func (b *runner) fleetOf(ctx context.Context, data, sleep string, n int, shape fleetShape) (fleetResult, error) {
	r := fleetResult{daemons: n, children: n * shape.Children}
	lanes := make([]string, fleetLanes)
	for i := range lanes {
		lanes[i] = fmt.Sprintf("f%02d", i)
	}
	db, err := b.createDatabase(ctx, fmt.Sprintf("fleet%d", n), lanes, (r.children+fleetLanes-1)/fleetLanes)
	if err != nil {
		return r, err
	}
	defer db.drop(ctx, b)
	_, err = db.queue.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.tasks (lane, agent, payload, payload_text, max_attempts)
		SELECT ($1::text[])[1 + i % cardinality($1::text[])], 'fleet', '{}'::jsonb, '{}', 1 FROM generate_series(0, $2 - 1) i`),
		lanes, r.children)
	if err != nil {
		return r, fmt.Errorf("queue %d tasks: %w", r.children, err)
	}
	db.queue.Close()
	db.queue = nil
	agent := fmt.Sprintf("agent \"fleet\" {\n  command  = [%q, \"3600\"]\n  schedule = \"@every 2s\"\n  parallel = %d\n  lease = %q\n  kill_grace = \"1s\"\n}\n",
		sleep, shape.Children, fleetLease.String())
	start := time.Now()
	daemons := make([]*daemonProc, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			daemons[i], errs[i] = b.startDaemon(ctx, db.url(daemonApp), fmt.Sprintf("fleet-%s-%03d", b.id, i), agent)
		})
	}
	wg.Wait()
	defer func() {
		var wg sync.WaitGroup
		for _, d := range daemons {
			if d != nil {
				wg.Go(func() { d.stop(b) })
			}
		}
		wg.Wait()
	}()
	for _, err := range errs {
		if err != nil {
			return r, err
		}
	}
	if r.alive, err = b.fleetFull(ctx, db, r.children); err != nil {
		return r, err
	}
	r.fill = time.Since(start)
	b.log.Info("fleet alive", "daemons", n, "children", r.children, "fill", r.fill.Round(time.Millisecond))
	if err := sleepCtx(ctx, shape.Warmup); err != nil {
		return r, err
	}
	var dpids []int
	for _, d := range daemons {
		dpids = append(dpids, d.pid())
	}
	// The bench's own reads go through one connection, opened before the
	// first reading: its backend's CPU counts with the server's, a few
	// statements a second.
	q, err := pgx.Connect(ctx, db.connURL(benchApp))
	if err != nil {
		return r, err
	}
	defer q.Close(ctx)
	s0, d0 := cpuOf(clusterPIDs(data)), cpuOf(dpids)
	x0, _, err := db.transactions(ctx)
	if err != nil {
		return r, err
	}
	t0 := time.Now()
	r.minLeaseLeft = fleetLease
	for time.Since(t0) < shape.Window {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return r, err
		}
		var left time.Duration
		err := q.QueryRow(ctx, db.sql(`SELECT coalesce(min(lease_expires_at - clock_timestamp()), interval '0') FROM {s}.runs WHERE state = 'running'`)).Scan(&left)
		if err != nil {
			return r, fmt.Errorf("read the fleet's leases: %w", err)
		}
		r.minLeaseLeft = min(r.minLeaseLeft, left)
	}
	r.wall = time.Since(t0)
	// Backends publish their counts at most once a second.
	if err := sleepCtx(ctx, 1100*time.Millisecond); err != nil {
		return r, err
	}
	x1, _, err := db.transactions(ctx)
	if err != nil {
		return r, err
	}
	r.xacts = x1 - x0
	r.server = cpuDelta(s0, cpuOf(clusterPIDs(data)))
	r.daemonsCPU = cpuDelta(d0, cpuOf(dpids))
	for _, pid := range dpids {
		if rss, _, err := readRSS(pid); err == nil {
			r.rss += rss
		}
	}
	err = q.QueryRow(ctx, db.sql(`SELECT count(*) FILTER (WHERE state <> 'running'),
		coalesce((SELECT min(c) FROM (SELECT count(*) c FROM {s}.runs WHERE state = 'running' GROUP BY owner) x), 0),
		coalesce((SELECT max(c) FROM (SELECT count(*) c FROM {s}.runs WHERE state = 'running' GROUP BY owner) x), 0)
		FROM {s}.runs`)).Scan(&r.lost, &r.perDaemon[0], &r.perDaemon[1])
	if err != nil {
		return r, fmt.Errorf("read the fleet's runs: %w", err)
	}
	if r.lost > 0 {
		// Say how they ended, for the one reading the log.
		rows, err := q.Query(ctx, db.sql(`SELECT state || ': ' || left(coalesce(summary, ''), 80), count(*) FROM {s}.runs
			WHERE state <> 'running' GROUP BY 1 ORDER BY 2 DESC LIMIT 5`))
		if err == nil {
			for rows.Next() {
				var how string
				var k int64
				if rows.Scan(&how, &k) == nil {
					b.log.Warn("fleet runs that ended", "daemons", n, "how", how, "runs", k)
				}
			}
			rows.Close()
		}
	}
	b.log.Info("measured", "what", "fleet", "daemons", n, "xacts", r.xacts, "server_cpu", r.server, "min_lease_left", r.minLeaseLeft, "lost", r.lost)
	return r, nil
}

// fleetFill is how long a fleet may take to start every child; past it,
// the fleet is measured with the children it has, and says how many.
const fleetFill = 4 * time.Minute

// fleetFull waits until want runs are live in db, for at most fleetFill,
// and returns how many are.
func (b *runner) fleetFull(ctx context.Context, db *database, want int) (int, error) {
	q, err := pgx.Connect(ctx, db.connURL(benchApp))
	if err != nil {
		return 0, err
	}
	defer q.Close(ctx)
	deadline := time.Now().Add(fleetFill)
	for {
		var live int
		if err := q.QueryRow(ctx, db.sql(`SELECT count(*) FROM {s}.runs WHERE state = 'running' AND pid IS NOT NULL`)).Scan(&live); err != nil {
			return 0, fmt.Errorf("count the fleet's live runs: %w", err)
		}
		if live >= want {
			return live, nil
		}
		if time.Now().After(deadline) {
			b.log.Warn("the fleet did not start every child in time; measuring it as it is", "alive", live, "want", want, "waited", fleetFill)
			return live, nil
		}
		if err := sleepCtx(ctx, 500*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// connURL is db's URL for a plain connection: the database, without the
// queue's schema parameter, which only qd reads.
func (d *database) connURL(app string) string {
	u, err := url.Parse(d.url(app))
	if err != nil {
		return d.url(app)
	}
	q := u.Query()
	q.Del("schema")
	u.RawQuery = q.Encode()
	return u.String()
}

// clusterPIDs lists the server's processes: the postmaster of the data
// directory and its children.
func clusterPIDs(data string) []int {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return nil
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pm, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return nil
	}
	out := []int{pm}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The parent is the second field after the command, which is in
		// parentheses and may hold spaces.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pm) {
			out = append(out, pid)
		}
	}
	return out
}

// fleetFigures adds the figures of one fleet, its cost per child set
// against base's, the smallest fleet (nil for that one).
func (b *runner) fleetFigures(shape fleetShape, r fleetResult, base *fleetResult) {
	sec := b.r.Section("fleet", "A fleet of daemons on one database")
	sec.Shape = fmt.Sprintf("one process per daemon, each with %d live children (sleep) of one agent on any of %d shared lanes, lease %s "+
		"(heartbeats every %s), on a private cluster of its own; counted over %s once every child was alive (or %s had passed) and %s more: "+
		"transactions from pg_stat_database, the server's CPU from /proc of the postmaster and its children; "+
		"the cost per live child per minute at each size against the smallest fleet's",
		shape.Children, fleetLanes, fleetLease, fleetLease/3, shape.Window, fleetFill, shape.Warmup)
	name := fmt.Sprintf("%d daemons × %d children", r.daemons, shape.Children)
	minutes := r.wall.Minutes()
	alive := float64(max(r.alive, 1))
	sec.Add(name, "children_alive", float64(r.alive), "children").Want(">=", float64(r.children))
	sec.Add(name, "time_to_fill_seconds", r.fill.Seconds(), "s")
	sec.Add(name, "server_transactions_per_second", float64(r.xacts)/r.wall.Seconds(), "/s")
	sec.Add(name, "server_cpu_percent", 100*r.server.Seconds()/r.wall.Seconds(), "%")
	// A ratio is set as its figure is added: a pointer into the section's
	// rows lasts only until the next Add.
	x := sec.Add(name, "transactions_per_child_minute", float64(r.xacts)/alive/minutes, "xacts")
	if base != nil {
		bx, _ := b.r.Find("fleet", fmt.Sprintf("%d daemons × %d children", base.daemons, shape.Children), "transactions_per_child_minute")
		x.Against(bx).Want("<=", 1.2)
	}
	c := sec.Add(name, "server_cpu_us_per_child_minute", float64(r.server.Microseconds())/alive/minutes, "µs")
	if base != nil {
		bc, _ := b.r.Find("fleet", fmt.Sprintf("%d daemons × %d children", base.daemons, shape.Children), "server_cpu_us_per_child_minute")
		if bc.Value > 0 {
			c.Against(bc).Want("<=", 1.2)
		}
	}
	sec.Add(name, "daemon_cpu_percent_each", 100*r.daemonsCPU.Seconds()/r.wall.Seconds()/float64(r.daemons), "%")
	sec.Add(name, "daemon_rss_mib_each", float64(r.rss)/(1<<20)/float64(r.daemons), "MiB")
	sec.Add(name, "children_per_daemon_min", float64(r.perDaemon[0]), "children").Want(">=", float64(shape.Children))
	sec.Add(name, "children_per_daemon_max", float64(r.perDaemon[1]), "children")
	sec.Add(name, "min_lease_left_seconds", r.minLeaseLeft.Seconds(), "s").Want(">=", fleetLease.Seconds()/2)
	sec.Add(name, "runs_lost", float64(r.lost), "runs").Want("<=", 0)
}
