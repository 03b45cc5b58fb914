package bench

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/qd-run/qd/pg"
)

// The shape of the idle-cost measurement.
const (
	idleAgents   = 50
	liveChildren = 200
)

// idleResult is what an idle daemon cost.
type idleResult struct {
	Wall time.Duration
	// Rounds is how many whole seconds, when every agent ticks, fell
	// between the two readings.
	Rounds    int64
	RSS, Peak int64
	cost
}

// idle measures a daemon with 50 agents ticking every second on an empty
// queue: transactions reaching PostgreSQL, the daemon's CPU and memory.
// Then a daemon with 200 live children: its memory.
func (b *runner) idle(ctx context.Context) error {
	var lanes []string
	for i := range idleAgents {
		lanes = append(lanes, fmt.Sprintf("i%03d", i))
	}
	for i := range liveChildren {
		lanes = append(lanes, fmt.Sprintf("c%03d", i))
	}
	db, err := b.createDatabase(ctx, "idle", lanes, 1)
	if err != nil {
		return err
	}
	defer db.drop(ctx, b)
	// Nothing but the daemon may count in the database's transactions.
	db.queue.Close()
	db.queue = nil
	prog, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("find the program true: %w", err)
	}
	var agents strings.Builder
	for i := range idleAgents {
		fmt.Fprintf(&agents, "agent \"idle-%02d\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n  lanes    = [%q]\n}\n",
			i, prog, lanes[i])
	}
	d, err := b.startDaemon(ctx, db.url(daemonApp), "qd-bench-"+b.id+"-idle", agents.String())
	if err != nil {
		return err
	}
	stop := sync.OnceFunc(func() { d.stop(b) })
	defer stop()
	idle, err := b.idleCost(ctx, db, d)
	if err != nil {
		return err
	}
	stop()
	rss, err := b.childrenRSS(ctx, db, lanes[idleAgents:])
	if err != nil {
		return err
	}
	b.idleFigures(idle, rss)
	if err := b.idleAnyLane(ctx, prog); err != nil {
		return err
	}
	return b.laptop(ctx)
}

// idleLaneCounts are the numbers of lanes the idle any-lane daemon is
// measured over; the first is the reference.
var idleLaneCounts = []int{idleAgents, 1_000}

// idleAnyLane measures an idle daemon whose 50 agents name no lanes, over
// 50 and then 1,000 lanes: its cost per tick should not grow with the
// lanes.
func (b *runner) idleAnyLane(ctx context.Context, prog string) error {
	var agents strings.Builder
	for i := range idleAgents {
		fmt.Fprintf(&agents, "agent \"idle-%02d\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n}\n", i, prog)
	}
	sec := b.r.Section("idle", "Idle cost of a daemon")
	var xacts, us Figure
	for i, n := range idleLaneCounts {
		lanes := make([]string, n)
		for k := range lanes {
			lanes[k] = fmt.Sprintf("a%04d", k)
		}
		db, err := b.createDatabase(ctx, fmt.Sprintf("idleany%d", n), lanes, 1)
		if err != nil {
			return err
		}
		db.queue.Close()
		db.queue = nil
		d, err := b.startDaemon(ctx, db.url(daemonApp), fmt.Sprintf("qd-bench-%s-idleany%d", b.id, n), agents.String())
		if err != nil {
			db.drop(ctx, b)
			return err
		}
		r, err := b.idleCost(ctx, db, d)
		d.stop(b)
		db.drop(ctx, b)
		if err != nil {
			return err
		}
		name := fmt.Sprintf("%d any-lane agents over %s lanes", idleAgents, groupThousands(int64(n)))
		ticks := float64(idleAgents) * float64(r.Rounds)
		x := sec.Add(name, "transactions_per_agent_tick", float64(r.sentOr())/ticks, "xacts")
		u := sec.Add(name, "postgres_us_per_agent_tick", float64(r.Postgres.Microseconds())/ticks, "µs")
		if i == 0 {
			xacts, us = *x, *u
			continue
		}
		x.Against(xacts).Want("<=", 1.05)
		if us.Value > 0 { // CPU counts in 10 ms steps: a short span may see none
			u.Against(us).Want("<=", 1.2)
		}
	}
	return nil
}

// sentOr is the transactions the daemon counted as it sent them, or,
// where it does not count them, those of its database.
func (r idleResult) sentOr() int64 {
	if r.Sent >= 0 {
		return r.Sent
	}
	return r.Xacts
}

// idleCost lets the daemon settle in, then counts over the size's idle
// span.
func (b *runner) idleCost(ctx context.Context, db *database, d *daemonProc) (idleResult, error) {
	var res idleResult
	b.log.Info("idle daemon", "agents", idleAgents, "for", b.sc.Idle)
	// Connections opened, statements prepared, and the counts of the
	// start-up published (backends publish at most once a second).
	if err := sleepCtx(ctx, b.sc.IdleWarmup); err != nil {
		return res, err
	}
	// Read half-way between ticks (they fall on whole seconds), so that
	// both readings miss the same share of unpublished counts.
	at := time.Now().Truncate(time.Second).Add(1500 * time.Millisecond)
	if err := sleepCtx(ctx, time.Until(at)); err != nil {
		return res, err
	}
	m0, err := readMeter(ctx, db, d, 0)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := sleepCtx(ctx, time.Until(at.Add(b.sc.Idle))); err != nil {
		return res, err
	}
	m1, err := readMeter(ctx, db, d, 0)
	if err != nil {
		return res, err
	}
	res.Wall = time.Since(start)
	res.Rounds = time.Now().Unix() - start.Unix()
	res.cost = m1.since(m0)
	if res.RSS, res.Peak, err = readRSS(d.pid()); err != nil {
		return res, err
	}
	if err := d.alive(); err != nil {
		return res, err
	}
	b.log.Info("measured", "what", "idle daemon", "transactions", res.Xacts, "sent", res.Sent, "wall", res.Wall.Round(time.Millisecond),
		"daemon_cpu", res.Daemon, "postgres_cpu", res.Postgres, "rss_kib", res.RSS>>10)
	return res, nil
}

// childrenRSS starts a daemon whose one agent runs `sleep` 200 at a time,
// one per lane, queues 200 tasks, and reads the daemon's memory once all
// 200 children are alive.
func (b *runner) childrenRSS(ctx context.Context, db *database, lanes []string) (int64, error) {
	prog, err := exec.LookPath("sleep")
	if err != nil {
		return 0, fmt.Errorf("find the program sleep: %w", err)
	}
	agent := fmt.Sprintf("agent \"sleeper\" {\n  command  = [%q, \"600\"]\n  schedule = \"@every 1s\"\n  lanes    = [%s]\n  parallel = %d\n  kill_grace = \"1s\"\n}\n",
		prog, quoteList(lanes), len(lanes))
	d, err := b.startDaemon(ctx, db.url(daemonApp), "qd-bench-"+b.id+"-children", agent)
	if err != nil {
		return 0, err
	}
	defer d.stop(b)
	q, err := pg.Open(ctx, db.url(benchApp), b.log)
	if err != nil {
		return 0, fmt.Errorf("pg.Open: %w", err)
	}
	_, err = q.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.tasks (lane, agent, payload, payload_text, max_attempts)
		SELECT unnest($1::text[]), 'sleeper', '{}'::jsonb, '{}', 1`), lanes)
	q.Close()
	if err != nil {
		return 0, fmt.Errorf("queue %d tasks: %w", len(lanes), err)
	}
	b.log.Info("daemon with live children", "children", len(lanes))
	deadline := time.Now().Add(30 * time.Second)
	for {
		if err := sleepCtx(ctx, 250*time.Millisecond); err != nil {
			return 0, err
		}
		if err := d.alive(); err != nil {
			return 0, err
		}
		snap, err := d.fetch(ctx)
		if err != nil {
			return 0, err
		}
		alive := 0
		for _, r := range snap.Runs {
			if r.PID != nil && *r.PID > 0 {
				alive++
			}
		}
		if alive >= len(lanes) {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("daemon started %d of %d children within 30 s; daemon log:\n%s", alive, len(lanes), d.logTail())
		}
	}
	rss, _, err := readRSS(d.pid())
	if err != nil {
		return 0, err
	}
	b.log.Info("measured", "what", "daemon with live children", "children", len(lanes), "rss_kib", rss>>10)
	return rss, nil
}

func (b *runner) idleFigures(r idleResult, childrenRSS int64) {
	sec := b.r.Section("idle", "Idle cost of a daemon")
	sec.Shape = fmt.Sprintf("%d agents on @every 1s, one lane each, empty queue, for %s after %s to settle; "+
		"transactions (each one round trip) as the daemon counts them (qd_database_transactions_total), and, as a check, "+
		"commits and rollbacks from pg_stat_database of a database of its own (whose counts each server process publishes up to a second late); "+
		"CPU from /proc/<pid>/stat over wall time, as %% of one core; memory: VmRSS", idleAgents, b.sc.Idle, b.sc.IdleWarmup)
	name := fmt.Sprintf("%d agents ticking every second", idleAgents)
	sec.Add(name, "transactions_per_second", perSecond(int(r.sentOr()), r.Wall), "/s")
	ticks := float64(idleAgents) * float64(r.Rounds)
	sec.Add(name, "transactions_per_agent_tick", float64(r.sentOr())/ticks, "xacts").Want("<=", 1)
	sec.Add(name, "database_transactions_per_agent_tick", float64(r.Xacts)/ticks, "xacts")
	sec.Add(name, "postgres_us_per_agent_tick", float64(r.Postgres.Microseconds())/ticks, "µs")
	sec.Add(name, "daemon_cpu_percent", 100*r.Daemon.Seconds()/r.Wall.Seconds(), "%").Want("<=", 2)
	sec.Add(name, "postgres_cpu_percent", 100*r.Postgres.Seconds()/r.Wall.Seconds(), "%")
	sec.Add(name, "rss_mib", float64(r.RSS)/(1<<20), "MiB").Want("<=", 30)
	sec.Add(name, "peak_rss_mib", float64(r.Peak)/(1<<20), "MiB")
	sec.Add(fmt.Sprintf("%d live children (sleep)", liveChildren), "rss_mib", float64(childrenRSS)/(1<<20), "MiB")
}
