// Command river runs River as a peer of qd in qdbench: it migrates River's
// schema into the database it is given, queues a number of jobs whose
// worker runs a program as qd runs a child (payload on stdin, output
// drained, a process group of its own), works them with one queue of
// MaxWorkers workers, and prints one JSON object on stdout: the steady rate
// over the middle 80% of the jobs' finish times, the machine's CPU (every
// process, from /proc/stat) while the jobs ran, and the database's commits.
//
// It is a module of its own so that qd never depends on River; qdbench
// builds it with `go build` in this directory.
//
//	river --db URL [--jobs N] [--workers N] [--payload TEXT] PROGRAM [ARG...]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Result is what the program prints; qdbench reads the same field names.
type Result struct {
	Jobs int `json:"jobs"`
	// Rate is jobs/s over the middle 80% of the finish times (finalized_at,
	// by the database clock).
	Rate float64 `json:"rate_per_second"`
	// SteadyFrom and SteadyTo bound the middle 80% of the finish times,
	// SteadyJobs of them, so that the caller can tell the machine's CPU
	// over the same span.
	SteadyFrom time.Time `json:"steady_from"`
	SteadyTo   time.Time `json:"steady_to"`
	SteadyJobs int       `json:"steady_jobs"`
	// Wall is from the client's start to the last job's completion event.
	Wall float64 `json:"wall_seconds"`
	// MachineCPU is the CPU time every process of the machine used over
	// Wall (busy time in /proc/stat); Idle is the idle time over it,
	// summed over the CPUs.
	MachineCPU float64 `json:"machine_cpu_seconds"`
	Idle       float64 `json:"machine_idle_seconds"`
	// Commits is the database's committed transactions while the jobs ran
	// (its xact_commit, from pg_stat_database, after the client stopped).
	Commits int64 `json:"commits"`
	// ProcessCPU is this process's own CPU (user and system, every thread)
	// from the client's start to the last job's completion event, and
	// ChildrenCPU that of the children it ran and reaped over the same span
	// (getrusage). BackendsCPU is the CPU of the PostgreSQL backends that
	// served the working pool, read from /proc/<pid>/stat just before the
	// client stops: the pool is new when the work starts, so each backend's
	// whole life is the work's. River's own share of a task's cost is
	// ProcessCPU plus BackendsCPU.
	ProcessCPU  float64 `json:"process_cpu_seconds"`
	ChildrenCPU float64 `json:"children_cpu_seconds"`
	BackendsCPU float64 `json:"backends_cpu_seconds"`
	Backends    int     `json:"backends"`
}

type execArgs struct {
	Payload string `json:"payload"`
}

func (execArgs) Kind() string { return "qdbench_exec" }

// execWorker runs the program once per job.
type execWorker struct {
	river.WorkerDefaults[execArgs]
	argv []string
}

func (w *execWorker) Work(ctx context.Context, job *river.Job[execArgs]) error {
	cmd := exec.Command(w.argv[0], w.argv[1:]...)
	cmd.Stdin = strings.NewReader(job.Args.Payload)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("run %s: %w", w.argv[0], err)
	}
	return nil
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintf(os.Stderr, "river: %s\n", err)
		os.Exit(1)
	}
}

func run() error {
	db := flag.String("db", "", "database `URL` to migrate River into and work in (required)")
	jobs := flag.Int("jobs", 20_000, "jobs to queue before the client starts")
	workers := flag.Int("workers", 32, "MaxWorkers of the one queue")
	payload := flag.String("payload", `{"bench":"e2e"}`, "payload written to each child's stdin")
	cooldown := flag.Duration("fetch-cooldown", time.Millisecond, "River's FetchCooldown (its default of 100 ms caps the rate near 10 fetches/s)")
	flag.Parse()
	if *db == "" || flag.NArg() == 0 {
		return errors.New("usage: river --db URL [--jobs N] [--workers N] PROGRAM [ARG...]")
	}
	ctx := context.Background()
	if err := prepare(ctx, *db, *jobs, *payload); err != nil {
		return err
	}
	res, err := work(ctx, *db, *jobs, *workers, *cooldown, flag.Args())
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(res)
}

// prepare migrates River's schema and queues the jobs, on a pool that is
// closed before the measured part starts.
func prepare(ctx context.Context, db string, jobs int, payload string) error {
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return fmt.Errorf("migrator: %w", err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate River's schema: %w", err)
	}
	c, err := river.NewClient(riverpgxv5.New(pool), &river.Config{})
	if err != nil {
		return fmt.Errorf("insert client: %w", err)
	}
	const batch = 2_000
	for done := 0; done < jobs; {
		n := min(batch, jobs-done)
		params := make([]river.InsertManyParams, n)
		for i := range params {
			params[i] = river.InsertManyParams{Args: execArgs{Payload: payload}, InsertOpts: &river.InsertOpts{MaxAttempts: 1}}
		}
		if _, err := c.InsertManyFast(ctx, params); err != nil {
			return fmt.Errorf("queue %d jobs: %w", n, err)
		}
		done += n
	}
	return nil
}

// work starts a client on a pool of its own, waits for every job's
// completion event, stops the client and reads the figures.
func work(ctx context.Context, db string, jobs, workers int, cooldown time.Duration, argv []string) (Result, error) {
	res := Result{Jobs: jobs}
	// The queuing pool's backends publish their counts as they exit.
	time.Sleep(1200 * time.Millisecond)
	c0, err := commits(ctx, db)
	if err != nil {
		return res, err
	}
	pool, err := pgxpool.New(ctx, db)
	if err != nil {
		return res, fmt.Errorf("connect: %w", err)
	}
	ws := river.NewWorkers()
	river.AddWorker(ws, &execWorker{argv: argv})
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:       ws,
		FetchCooldown: cooldown,
		Logger:        slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		pool.Close()
		return res, fmt.Errorf("client: %w", err)
	}
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs + 1_000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()
	busy0, idle0, err := machineCPU()
	if err != nil {
		pool.Close()
		return res, err
	}
	self0, children0 := rusage(syscall.RUSAGE_SELF), rusage(syscall.RUSAGE_CHILDREN)
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		pool.Close()
		return res, fmt.Errorf("start client: %w", err)
	}
	limit := time.After(30*time.Second + time.Duration(jobs)*20*time.Millisecond)
	var waitErr error
	for done := 0; done < jobs && waitErr == nil; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				waitErr = fmt.Errorf("job %d did not complete: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-limit:
			waitErr = fmt.Errorf("%d of %d jobs completed in time", done, jobs)
		}
	}
	res.Wall = time.Since(start).Seconds()
	res.ProcessCPU = rusage(syscall.RUSAGE_SELF) - self0
	res.ChildrenCPU = rusage(syscall.RUSAGE_CHILDREN) - children0
	busy1, idle1, err := machineCPU()
	if err != nil {
		waitErr = errors.Join(waitErr, err)
	}
	res.MachineCPU, res.Idle = busy1-busy0, idle1-idle0
	if waitErr == nil {
		res.BackendsCPU, res.Backends, waitErr = backendsCPU(ctx, db)
	}
	stopCtx, stop := context.WithTimeout(ctx, 15*time.Second)
	defer stop()
	if err := client.Stop(stopCtx); err != nil {
		waitErr = errors.Join(waitErr, fmt.Errorf("stop client: %w", err))
	}
	if waitErr != nil {
		pool.Close()
		return res, waitErr
	}
	err = steadyRate(ctx, pool, &res)
	pool.Close()
	if err != nil {
		return res, err
	}
	time.Sleep(1200 * time.Millisecond)
	c1, err := commits(ctx, db)
	if err != nil {
		return res, err
	}
	// The two reading sessions' own transactions are left out.
	res.Commits = c1 - c0 - 2
	return res, nil
}

// steadyRate sets the rate over the middle 80% of the finish times and
// that span.
func steadyRate(ctx context.Context, pool *pgxpool.Pool, res *Result) error {
	rows, err := pool.Query(ctx, `SELECT finalized_at FROM river_job WHERE state = 'completed' ORDER BY finalized_at`)
	if err != nil {
		return fmt.Errorf("read finish times: %w", err)
	}
	ends, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil {
		return fmt.Errorf("read finish times: %w", err)
	}
	lo, hi := len(ends)/10, len(ends)-1-len(ends)/10
	if hi <= lo || !ends[hi].After(ends[lo]) {
		return fmt.Errorf("%d finish times span no time", len(ends))
	}
	res.Rate = float64(hi-lo) / ends[hi].Sub(ends[lo]).Seconds()
	res.SteadyFrom, res.SteadyTo, res.SteadyJobs = ends[lo], ends[hi], hi-lo
	return nil
}

// commits reads the database's committed transactions on a connection of
// its own.
func commits(ctx context.Context, db string) (int64, error) {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	var n int64
	err = conn.QueryRow(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read commits: %w", err)
	}
	return n, nil
}

// rusage is the user and system CPU of who (RUSAGE_SELF or
// RUSAGE_CHILDREN), in seconds.
func rusage(who int) float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(who, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// backendsCPU sums the CPU of the database's other backends (the working
// pool's, since the queuing pool is closed) from /proc/<pid>/stat, which
// PostgreSQL on the same machine lets this process read.
func backendsCPU(ctx context.Context, db string) (float64, int, error) {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return 0, 0, fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return 0, 0, fmt.Errorf("list backends: %w", err)
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return 0, 0, fmt.Errorf("list backends: %w", err)
	}
	var sum float64
	n := 0
	for _, pid := range pids {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // ended meanwhile, or on another machine
		}
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		if i < 0 || len(f) < 13 {
			return 0, 0, fmt.Errorf("backend %d: unexpected /proc/%d/stat", pid, pid)
		}
		// utime and stime are fields 14 and 15, so 11 and 12 here, in
		// USER_HZ (100/s).
		for _, k := range []int{11, 12} {
			v, err := strconv.ParseInt(f[k], 10, 64)
			if err != nil {
				return 0, 0, fmt.Errorf("backend %d: field %d of /proc/%d/stat: %w", pid, k+3, pid, err)
			}
			sum += float64(v) / 100
		}
		n++
	}
	return sum, n, nil
}

// machineCPU returns the busy and idle time of all CPUs from /proc/stat,
// in seconds.
func machineCPU() (busy, idle float64, err error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("read machine cpu: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, 0, fmt.Errorf("read machine cpu: unexpected first line %q of /proc/stat", line)
	}
	// user nice system idle iowait irq softirq steal, in USER_HZ (100/s).
	var t [8]float64
	for k := range t {
		v, err := strconv.ParseInt(f[1+k], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read machine cpu: field %d of %q: %w", k+1, line, err)
		}
		t[k] = float64(v) / 100
	}
	return t[0] + t[1] + t[2] + t[5] + t[6] + t[7], t[3] + t[4], nil
}
