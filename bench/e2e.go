package bench

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The shape of the end-to-end measurement.
const (
	e2eLanes    = 64
	e2eParallel = 32
	e2ePayload  = `{"bench":"e2e"}`
	// e2eWide is the one lane of limit e2eParallel.
	e2eWide = "wide"
)

// peerResult is what one runner (the loop, River, a qd daemon) did with a
// backlog of tasks, and what it cost.
type peerResult struct {
	Tasks int
	steady
	Wall time.Duration // from the start of the work to the last task done
	// machine is every process's CPU over the steady span, from /proc/stat.
	machine machineCPU
	// Commits of the runner's database; -1 where there is none (the loop).
	Commits int64
	cost    // the runner's own CPU (daemon or River's process), its children's and its backends'; zero for the loop
}

// cpuPerTask is the machine's CPU over the steady span per task finished
// in it.
func (r peerResult) cpuPerTask() float64 { return ms(r.machine.Busy) / float64(max(r.steady.Tasks, 1)) }

// e2e measures tasks/s through `qd run` daemons with real children (one
// lane of limit 32; 64 lanes of limit 1) against a plain Go loop that
// fork-execs the same program 32 at a time and against River with a worker
// that execs it, in interleaved repetitions; then tick-to-exec latency.
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
	if _, err := db.queue.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.lanes (name, max_running) VALUES ($1, $2)`), e2eWide, e2eParallel); err != nil {
		return fmt.Errorf("create lane %s: %w", e2eWide, err)
	}
	river, skip := b.buildRiver(ctx)
	n := b.sc.E2ETasks
	var loops, rivers, ones, manys []peerResult
	run := []func() error{
		func() error {
			r, err := forkExec(ctx, prog, []byte(e2ePayload), e2eParallel, n)
			if err != nil {
				return fmt.Errorf("fork-exec loop: %w", err)
			}
			b.log.Info("measured", "what", "fork-exec loop", "tasks", n, "per_second", int(r.Rate), "cpu_ms_per_task", r.cpuPerTask())
			loops = append(loops, r)
			return nil
		},
		func() error {
			if river == "" {
				return nil
			}
			r, err := b.runRiver(ctx, db, river, prog, n)
			if err != nil {
				return err
			}
			rivers = append(rivers, r)
			return nil
		},
		func() error {
			r, err := b.qdShape(ctx, db, "one", []string{e2eWide}, n)
			ones = append(ones, r)
			return err
		},
		func() error {
			r, err := b.qdShape(ctx, db, "many", lanes, n)
			manys = append(manys, r)
			return err
		},
	}
	// Each repetition starts one runner later, so that none always runs
	// first or last.
	for rep := range b.sc.E2EReps {
		for k := range run {
			if err := run[(k+rep)%len(run)](); err != nil {
				return err
			}
		}
	}
	d, err := b.startDaemon(ctx, db.url(daemonApp), "qd-bench-"+b.id+"-latency", qdAgent(prog, lanes))
	if err != nil {
		return err
	}
	lat, err := b.tickLatency(ctx, db, d, lanes[:e2eParallel])
	d.stop(b)
	if err != nil {
		return err
	}
	if lat.Loop, err = forkExecAtTicks(ctx, prog, []byte(e2ePayload), e2eParallel, b.sc.LatencyTicks); err != nil {
		return fmt.Errorf("fork-exec loop at ticks: %w", err)
	}
	b.log.Info("measured", "what", "fork-exec loop at ticks", "runs", len(lat.Loop),
		"exec_p50", percentile(lat.Loop, 0.5), "exec_p99", percentile(lat.Loop, 0.99))
	b.e2eFigures(prog, n, skip, loops, rivers, ones, manys, lat)
	return nil
}

// qdAgent is the config of the one agent of a bench daemon.
func qdAgent(prog string, lanes []string) string {
	return fmt.Sprintf("agent \"bench\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n  lanes    = [%s]\n  parallel = %d\n}\n",
		prog, quoteList(lanes), e2eParallel)
}

// qdShape starts a daemon whose agent runs over lanes, measures its
// throughput over n tasks and stops it.
func (b *runner) qdShape(ctx context.Context, db *database, shape string, lanes []string, n int) (peerResult, error) {
	prog, _ := exec.LookPath("true")
	// Each River run starts on a database of its own; each qd run starts
	// on emptied tables likewise, not on the finished tasks and dead rows
	// the runs before it left (autovacuum may be off).
	if _, err := db.queue.Pool().Exec(ctx, db.sql(`TRUNCATE {s}.tasks, {s}.runs CASCADE`)); err != nil {
		return peerResult{}, fmt.Errorf("empty the tables before qd's run: %w", err)
	}
	d, err := b.startDaemon(ctx, db.url(daemonApp), "qd-bench-"+b.id+"-"+shape, qdAgent(prog, lanes))
	if err != nil {
		return peerResult{}, err
	}
	defer d.stop(b)
	return b.throughput(ctx, db, d, lanes, n)
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(q, ", ")
}

// ownQueries counts the statements the bench itself sent to a bench
// database while its transactions were counted, to take them out.
type ownQueries struct{ n int64 }

// throughput queues n tasks at once, claimable now, and waits until the
// daemon has run them all. The rate comes from the tasks' finished_at
// (the database clock): the middle 80% of the finish times, so that the
// wait for the first tick and the last stragglers do not count.
func (b *runner) throughput(ctx context.Context, db *database, d *daemonProc, lanes []string, n int) (peerResult, error) {
	res := peerResult{Tasks: n}
	var own ownQueries
	var after int64
	if err := db.queue.Pool().QueryRow(ctx, db.sql(`SELECT coalesce(max(id), 0) FROM {s}.tasks`)).Scan(&after); err != nil {
		return res, fmt.Errorf("read last task: %w", err)
	}
	own.n++
	_, err := db.queue.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.tasks (lane, agent, payload, payload_text, run_after, max_attempts)
		SELECT ($2::text[])[1 + g % cardinality($2::text[])], 'bench', $3::jsonb, $3, now() - interval '1 hour', 1
		FROM generate_series(0, $1 - 1) g`), n, lanes, e2ePayload)
	if err != nil {
		return res, fmt.Errorf("queue %d tasks: %w", n, err)
	}
	own.n++
	off, err := db.clockOffset(ctx)
	if err != nil {
		return res, err
	}
	sampler := sampleMachine()
	stopped := false
	defer func() {
		if !stopped {
			sampler.stop()
		}
	}()
	m0, err := readMeter(ctx, db, d, 0)
	if err != nil {
		return res, err
	}
	start := time.Now()
	b.log.Info("daemon throughput", "tasks", n)
	// A daemon a twentieth as fast as the loop still finishes.
	limit := 30*time.Second + time.Duration(float64(n)/50*float64(time.Second))
	if err := b.waitDone(ctx, db, d, after, n, limit, &own); err != nil {
		return res, err
	}
	res.Wall = time.Since(start)
	m1, err := readMeter(ctx, db, d, 1500*time.Millisecond)
	if err != nil {
		return res, err
	}
	res.cost = m1.since(m0)
	stopped = true
	if err := sampler.stop(); err != nil {
		return res, err
	}
	res.Xacts -= own.n
	res.Commits = res.cost.Commits - own.n
	rows, err := db.queue.Pool().Query(ctx, db.sql(`SELECT finished_at FROM {s}.tasks WHERE state = 'done' AND id > $1 ORDER BY finished_at`), after)
	if err != nil {
		return res, fmt.Errorf("read finish times: %w", err)
	}
	ends, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return res, fmt.Errorf("read finish times: %w", err)
	}
	for i := range ends {
		ends[i] = ends[i].Add(-off)
	}
	if res.steady, err = steadySpan(ends); err != nil {
		return res, fmt.Errorf("daemon throughput: %w", err)
	}
	if res.machine, err = sampler.between(res.From, res.To); err != nil {
		return res, fmt.Errorf("daemon throughput: %w", err)
	}
	b.log.Info("measured", "what", "daemon throughput", "lanes", len(lanes), "tasks", n, "per_second", int(res.Rate),
		"machine_cpu_ms_per_task", res.cpuPerTask(), "busy", res.machine.busyShare(), "commits", res.Commits,
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
// that became claimable exactly at a tick, and the plain loop's tick to
// exec for as many children started at a tick.
type latencyResult struct {
	Ticks, PerTick    int
	Claim, Exec, Loop []time.Duration // sorted
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

func (b *runner) e2eFigures(prog string, n int, skip string, loops, rivers, ones, manys []peerResult, lat latencyResult) {
	sec := b.r.Section("e2e", "End to end through the daemon with real children, against a plain fork-exec loop and River")
	sec.Shape = fmt.Sprintf("program %s, payload on stdin, output drained, own process group, %d at once; each runner works "+
		"through %s tasks queued before it starts; %d interleaved repetitions of loop, River, qd with one lane of limit %d, "+
		"qd with %d lanes of limit 1 (each repetition starts one runner later), medians; tasks/s over the middle 80%% of the "+
		"finish times; machine CPU (every process, from /proc/stat) and busy share from the start of the work to the last "+
		"task done; commits from pg_stat_database of the runner's own database; latency: %d tasks per tick claimable at the tick, %d ticks, and the loop starting as many children at once at as many ticks",
		prog, e2eParallel, groupThousands(int64(n)), b.sc.E2EReps, e2eParallel, e2eLanes, lat.PerTick, lat.Ticks)
	if skip != "" {
		sec.Shape += "; " + skip
	}
	per := func(rs []peerResult, f func(peerResult) float64) float64 {
		v := make([]float64, len(rs))
		for i, r := range rs {
			v[i] = f(r)
		}
		return median(v)
	}
	rate := func(r peerResult) float64 { return r.Rate }
	cpu := func(r peerResult) float64 { return r.cpuPerTask() }
	busy := func(r peerResult) float64 { return 100 * r.machine.busyShare() }
	commits := func(r peerResult) float64 { return float64(r.Commits) / float64(r.Tasks) }
	loopName := fmt.Sprintf("fork-exec loop, %d at once", e2eParallel)
	loop := *sec.Add(loopName, "tasks_per_second", per(loops, rate), "/s")
	loopCPU := *sec.Add(loopName, "cpu_ms_per_task", per(loops, cpu), "ms")
	loopBusy := *sec.Add(loopName, "busy_percent", per(loops, busy), "%")
	// A runner's own share of a task: its process (the daemon, River's
	// client) and the backends serving it, the children left out.
	ownCPU := func(r peerResult) float64 { return ms(r.Daemon+r.Postgres) / float64(r.Tasks) }
	var river, riverOwn Figure
	if len(rivers) > 0 {
		name := fmt.Sprintf("River v0.51.2, exec worker, MaxWorkers %d", e2eParallel)
		river = *sec.Add(name, "tasks_per_second", per(rivers, rate), "/s").Against(loop)
		sec.Add(name, "cpu_ms_per_task", per(rivers, cpu), "ms").Against(loopCPU)
		sec.Add(name, "busy_percent", per(rivers, busy), "%").Against(loopBusy)
		sec.Add(name, "commits_per_task", per(rivers, commits), "commits")
		sec.Add(name, "process_cpu_ms_per_task", per(rivers, func(r peerResult) float64 { return ms(r.Daemon) / float64(r.Tasks) }), "ms")
		sec.Add(name, "children_cpu_ms_per_task", per(rivers, func(r peerResult) float64 { return ms(r.Children) / float64(r.Tasks) }), "ms")
		sec.Add(name, "postgres_cpu_ms_per_task", per(rivers, func(r peerResult) float64 { return ms(r.Postgres) / float64(r.Tasks) }), "ms")
		riverOwn = *sec.Add(name, "own_cpu_ms_per_task", per(rivers, ownCPU), "ms")
	}
	for _, shape := range []struct {
		name string
		rs   []peerResult
	}{
		{fmt.Sprintf("qd run, one lane of limit %d", e2eParallel), ones},
		{fmt.Sprintf("qd run, %d lanes of limit 1", e2eLanes), manys},
	} {
		name, rs := shape.name, shape.rs
		r := per(rs, rate)
		sec.Add(name, "tasks_per_second", r, "/s").Against(loop).Want(">=", 0.8)
		if len(rivers) > 0 {
			sec.Add(name, "tasks_per_second_vs_river", r, "/s").Against(river).Want(">=", 1.0)
		}
		sec.Add(name, "cpu_ms_per_task", per(rs, cpu), "ms").Against(loopCPU).Want("<=", 1.25)
		sec.Add(name, "busy_percent", per(rs, busy), "%").Against(loopBusy).Want(">=", 1.0)
		sec.Add(name, "commits_per_task", per(rs, commits), "commits")
		sec.Add(name, "transactions_per_task", per(rs, func(r peerResult) float64 { return float64(r.Xacts) / float64(r.Tasks) }), "xacts")
		sec.Add(name, "daemon_cpu_ms_per_task", per(rs, func(r peerResult) float64 { return ms(r.Daemon) / float64(r.Tasks) }), "ms")
		sec.Add(name, "children_cpu_ms_per_task", per(rs, func(r peerResult) float64 { return ms(r.Children) / float64(r.Tasks) }), "ms")
		sec.Add(name, "postgres_cpu_ms_per_task", per(rs, func(r peerResult) float64 { return ms(r.Postgres) / float64(r.Tasks) }), "ms")
		own := sec.Add(name, "own_cpu_ms_per_task", per(rs, ownCPU), "ms")
		if len(rivers) > 0 {
			own.Against(riverOwn).Want("<=", 1.0)
		}
	}
	// The loop's tick to exec is the floor of the daemon's on this
	// machine; the targets stay on the daemon's values.
	loopTick := fmt.Sprintf("fork-exec loop, %d started at a tick", lat.PerTick)
	loop50 := *sec.Add(loopTick, "tick_to_exec_p50_ms", ms(percentile(lat.Loop, 0.5)), "ms")
	loop99 := *sec.Add(loopTick, "tick_to_exec_p99_ms", ms(percentile(lat.Loop, 0.99)), "ms")
	tick := fmt.Sprintf("%d tasks claimable at a tick", lat.PerTick)
	sec.Add(tick, "tick_to_claim_p50_ms", ms(percentile(lat.Claim, 0.5)), "ms")
	sec.Add(tick, "tick_to_claim_p99_ms", ms(percentile(lat.Claim, 0.99)), "ms")
	sec.Add(tick, "tick_to_exec_p50_ms", ms(percentile(lat.Exec, 0.5)), "ms").Want("<=", 5).Against(loop50)
	sec.Add(tick, "tick_to_exec_p99_ms", ms(percentile(lat.Exec, 0.99)), "ms").Want("<=", 15).Against(loop99)
}

// median is the middle of v (the mean of the two middle values of an even
// count); v is sorted in place.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
