package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The shape of the end-to-end measurement.
const (
	e2eLanes    = 64
	e2eParallel = 32
	e2ePayload  = `{"bench":"e2e"}`
)

// e2e measures tasks/s and tick-to-exec latency through a `qd run` daemon
// with real children, against a plain Go loop that fork-execs the same
// program with the same parallelism: loop, daemon, loop again.
func (b *runner) e2e(ctx context.Context) error {
	prog, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("find the program true: %w", err)
	}
	lanes := make([]string, e2eLanes)
	for i := range lanes {
		lanes[i] = fmt.Sprintf("e%03d", i)
	}
	db, err := b.createDatabase(ctx, "e2e", lanes, 1)
	if err != nil {
		return err
	}
	defer db.drop(ctx, b)

	loop1, err := b.forkLoop(ctx, prog)
	if err != nil {
		return err
	}
	agent := fmt.Sprintf("agent \"bench\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n  lanes    = [%s]\n  parallel = %d\n}\n",
		prog, quoteList(lanes), e2eParallel)
	d, err := b.startDaemon(ctx, db.url(daemonApp), "qd-bench-"+b.id+"-e2e", agent)
	if err != nil {
		return err
	}
	stop := sync.OnceFunc(func() { d.stop(b) })
	defer stop()
	n := min(max(int(loop1.perSecond()*max(b.sc.Measure, time.Second).Seconds()), 500), 200_000)
	tp, err := b.throughput(ctx, db, d, lanes, n)
	if err != nil {
		return err
	}
	lat, err := b.tickLatency(ctx, db, d, lanes[:e2eParallel])
	if err != nil {
		return err
	}
	stop()
	loop2, err := b.forkLoop(ctx, prog)
	if err != nil {
		return err
	}
	b.e2eFigures(prog, loop1, loop2, tp, lat)
	return nil
}

// forkLoop measures the plain fork-exec loop.
func (b *runner) forkLoop(ctx context.Context, prog string) (forkResult, error) {
	r, err := forkExec(ctx, prog, []byte(e2ePayload), e2eParallel, b.warmup(), b.sc.Measure)
	if err != nil {
		return r, fmt.Errorf("fork-exec loop: %w", err)
	}
	b.log.Info("measured", "what", "fork-exec loop", "tasks", r.Tasks, "per_second", int(r.perSecond()))
	return r, nil
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// throughputResult is what the daemon did with a backlog, and its cost.
type throughputResult struct {
	Tasks int
	Rate  float64       // tasks/s over the middle 80% of the finish times
	Wall  time.Duration // from the enqueue to the last task done
	cost
}

// ownQueries counts the statements the bench itself sent to a bench
// database while its transactions were counted, to take them out.
type ownQueries struct{ n int64 }

// throughput queues n tasks at once, claimable now, and waits until the
// daemon has run them all. The rate comes from the tasks' finished_at
// (the database clock): the middle 80% of the finish times, so that the
// wait for the first tick and the last stragglers do not count.
func (b *runner) throughput(ctx context.Context, db *database, d *daemonProc, lanes []string, n int) (throughputResult, error) {
	res := throughputResult{Tasks: n}
	var own ownQueries
	m0, err := readMeter(ctx, db, d, 0)
	if err != nil {
		return res, err
	}
	start := time.Now()
	_, err = db.queue.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.tasks (lane, agent, payload, payload_text, run_after, max_attempts)
		SELECT ($2::text[])[1 + g % cardinality($2::text[])], 'bench', $3::jsonb, $3, now() - interval '1 hour', 1
		FROM generate_series(0, $1 - 1) g`), n, lanes, e2ePayload)
	if err != nil {
		return res, fmt.Errorf("queue %d tasks: %w", n, err)
	}
	own.n++
	b.log.Info("daemon throughput", "tasks", n)
	// A daemon a twentieth as fast as the loop still finishes.
	limit := 30*time.Second + time.Duration(float64(n)/50*float64(time.Second))
	if err := b.waitDone(ctx, db, d, 0, n, limit, &own); err != nil {
		return res, err
	}
	res.Wall = time.Since(start)
	m1, err := readMeter(ctx, db, d, 1500*time.Millisecond)
	if err != nil {
		return res, err
	}
	res.cost = m1.since(m0)
	res.Xacts -= own.n
	rows, err := db.queue.Pool().Query(ctx, db.sql(`SELECT finished_at FROM {s}.tasks WHERE state = 'done' ORDER BY finished_at`))
	if err != nil {
		return res, fmt.Errorf("read finish times: %w", err)
	}
	ends, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return res, fmt.Errorf("read finish times: %w", err)
	}
	lo, hi := len(ends)/10, len(ends)-1-len(ends)/10
	if hi <= lo || !ends[hi].After(ends[lo]) {
		return res, fmt.Errorf("daemon throughput: %d finish times span no time", len(ends))
	}
	res.Rate = float64(hi-lo) / ends[hi].Sub(ends[lo]).Seconds()
	b.log.Info("measured", "what", "daemon throughput", "tasks", n, "per_second", int(res.Rate),
		"daemon_cpu", res.Daemon, "children_cpu", res.Children, "postgres_cpu", res.Postgres, "transactions", res.Xacts)
	return res, nil
}

// waitDone polls until the tasks with id above after (want of them) are
// done; a task that ended otherwise, a daemon that exited or the time
// limit stops the bench.
func (b *runner) waitDone(ctx context.Context, db *database, d *daemonProc, after int64, want int, limit time.Duration, own *ownQueries) error {
	deadline := time.Now().Add(limit)
	for {
		if err := sleepCtx(ctx, 200*time.Millisecond); err != nil {
			return err
		}
		if err := d.alive(); err != nil {
			return err
		}
		var done, bad int
		err := db.queue.Pool().QueryRow(ctx, db.sql(`SELECT count(*) FILTER (WHERE state = 'done'),
			count(*) FILTER (WHERE state IN ('failed', 'cancelled')) FROM {s}.tasks WHERE id > $1`), after).Scan(&done, &bad)
		own.n++
		if err != nil {
			return fmt.Errorf("count finished tasks: %w", err)
		}
		if bad > 0 {
			return fmt.Errorf("%d bench tasks failed or were cancelled (see `qd runs`); daemon log:\n%s", bad, d.logTail())
		}
		if done >= want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon ran %d of %d tasks in %s; daemon log:\n%s", done, want, limit, d.logTail())
		}
	}
}

// latencyResult is the tick-to-claim and tick-to-exec latency of tasks
// that became claimable exactly at a tick.
type latencyResult struct {
	Ticks, PerTick int
	Claim, Exec    []time.Duration // sorted
}

// tickLatency queues, for each of the size's ticks, one task per lane in
// lanes whose run_after is that tick of the agent's @every 1s schedule (a
// whole second, by the database clock corrected to the daemon's), so that
// each task becomes claimable at the tick that claims it. Tick to claim is
// the run's started_at minus run_after, both by the database clock; tick
// to exec is when the daemon logged "child started" (after fork and exec
// returned) minus the tick, by the local clock.
func (b *runner) tickLatency(ctx context.Context, db *database, d *daemonProc, lanes []string) (latencyResult, error) {
	res := latencyResult{Ticks: b.sc.LatencyTicks, PerTick: len(lanes)}
	off, err := db.clockOffset(ctx)
	if err != nil {
		return res, err
	}
	var after int64
	if err := db.queue.Pool().QueryRow(ctx, db.sql(`SELECT coalesce(max(id), 0) FROM {s}.tasks`)).Scan(&after); err != nil {
		return res, fmt.Errorf("read last task: %w", err)
	}
	first := time.Now().Truncate(time.Second).Add(2 * time.Second)
	want := res.Ticks * res.PerTick
	_, err = db.queue.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.tasks (lane, agent, payload, payload_text, run_after, max_attempts)
		SELECT ($2::text[])[1 + g % cardinality($2::text[])], 'bench', $3::jsonb, $3,
		       $4::timestamptz + (g / cardinality($2::text[])) * interval '1 second', 1
		FROM generate_series(0, $1 - 1) g`), want, lanes, e2ePayload, first.Add(off))
	if err != nil {
		return res, fmt.Errorf("queue %d tasks: %w", want, err)
	}
	b.log.Info("tick latency", "ticks", res.Ticks, "tasks_per_tick", res.PerTick)
	limit := time.Until(first) + time.Duration(res.Ticks)*time.Second + 30*time.Second
	if err := b.waitDone(ctx, db, d, after, want, limit, &ownQueries{}); err != nil {
		return res, err
	}
	type sample struct {
		run      int64
		runAfter time.Time
		claim    float64 // seconds
	}
	rows, err := db.queue.Pool().Query(ctx, db.sql(`SELECT r.id, t.run_after, extract(epoch FROM r.started_at - t.run_after)::float8
		FROM {s}.runs r JOIN {s}.tasks t ON t.id = r.task_id WHERE t.id > $1`), after)
	if err != nil {
		return res, fmt.Errorf("read runs: %w", err)
	}
	samples, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (sample, error) {
		var s sample
		err := row.Scan(&s.run, &s.runAfter, &s.claim)
		return s, err
	})
	if err != nil {
		return res, fmt.Errorf("read runs: %w", err)
	}
	starts, err := d.childStarts()
	if err != nil {
		return res, err
	}
	for _, s := range samples {
		at, ok := starts[s.run]
		if !ok {
			return res, fmt.Errorf("daemon log has no \"child started\" for run %d", s.run)
		}
		res.Claim = append(res.Claim, time.Duration(s.claim*float64(time.Second)))
		res.Exec = append(res.Exec, at.Sub(s.runAfter.Add(-off)))
	}
	slices.Sort(res.Claim)
	slices.Sort(res.Exec)
	b.log.Info("measured", "what", "tick latency", "runs", len(samples),
		"claim_p50", percentile(res.Claim, 0.5), "exec_p50", percentile(res.Exec, 0.5), "exec_p99", percentile(res.Exec, 0.99))
	return res, nil
}

func (b *runner) e2eFigures(prog string, loop1, loop2 forkResult, tp throughputResult, lat latencyResult) {
	sec := b.r.Section("e2e", "End to end through the daemon with real children, against a plain fork-exec loop")
	sec.Shape = fmt.Sprintf("program %s, payload on stdin, output drained, own process group; %d lanes of limit 1, "+
		"one agent of parallel %d on @every 1s; loop, daemon, loop again; daemon tasks/s from finished_at of the middle 80%% "+
		"of %s tasks queued at once; CPU per task from /proc (daemon, its children, its PostgreSQL backends); "+
		"transactions from pg_stat_database of a database of its own; latency: %d tasks per tick claimable at the tick, %d ticks",
		prog, e2eLanes, e2eParallel, groupThousands(int64(tp.Tasks)), lat.PerTick, lat.Ticks)
	loopName := fmt.Sprintf("fork-exec loop, %d in parallel", e2eParallel)
	sec.Add(loopName+", before", "tasks_per_second", loop1.perSecond(), "/s")
	sec.Add(loopName+", after", "tasks_per_second", loop2.perSecond(), "/s")
	loop := *sec.Add(loopName+", mean", "tasks_per_second", (loop1.perSecond()+loop2.perSecond())/2, "/s")
	loopCPU := *sec.Add(loopName+", mean", "cpu_ms_per_task",
		ms(loop1.CPU+loop2.CPU)/float64(max(loop1.Tasks+loop2.Tasks, 1)), "ms")
	name := fmt.Sprintf("qd run, %d lanes, parallel %d", e2eLanes, e2eParallel)
	sec.Add(name, "tasks_per_second", tp.Rate, "/s").Against(loop).Want(">=", 0.8)
	per := func(d time.Duration) float64 { return ms(d) / float64(tp.Tasks) }
	sec.Add(name, "cpu_ms_per_task", per(tp.Daemon+tp.Children+tp.Postgres), "ms").Against(loopCPU)
	sec.Add(name, "daemon_cpu_ms_per_task", per(tp.Daemon), "ms")
	sec.Add(name, "children_cpu_ms_per_task", per(tp.Children), "ms")
	sec.Add(name, "postgres_cpu_ms_per_task", per(tp.Postgres), "ms")
	sec.Add(name, "transactions_per_task", float64(tp.Xacts)/float64(tp.Tasks), "xacts")
	tick := fmt.Sprintf("%d tasks claimable at a tick", lat.PerTick)
	sec.Add(tick, "tick_to_claim_p50_ms", ms(percentile(lat.Claim, 0.5)), "ms")
	sec.Add(tick, "tick_to_claim_p99_ms", ms(percentile(lat.Claim, 0.99)), "ms")
	sec.Add(tick, "tick_to_exec_p50_ms", ms(percentile(lat.Exec, 0.5)), "ms")
	sec.Add(tick, "tick_to_exec_p99_ms", ms(percentile(lat.Exec, 0.99)), "ms")
}
