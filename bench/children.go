package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"syscall"
	"time"
)

// childrenPerLane is how many of the children share a lane.
const childrenPerLane = 100

// childrenResult is what one daemon holding many children cost.
type childrenResult struct {
	N, Quarter       int
	RSS0, RSS        int64 // before any child, with all N
	FDs0, FDs        int
	CPUQuarter, CPUN float64 // % of a core while the children idle
	Window           time.Duration
	Beats            int64 // heartbeat calls over the window at N
	LagWorst, LagP99 time.Duration
	Renewals         int
	LeastLeft        time.Duration
	Status, Overview []time.Duration
	StatusAll        []time.Duration // qd status --runs all
	Drain, StartAll  time.Duration
	Lease, Heartbeat time.Duration
	KillGrace        time.Duration
	Capped           string // why fewer children than asked were held
}

// children measures one daemon holding N live children (sleep), a hundred
// per lane: its memory and open files per child, its CPU while they idle
// at a quarter of them and at all of them, its heartbeat calls per
// interval, how late leases are renewed, the latency of qd status and of
// the dashboard's overview, and the drain on SIGTERM.
func (b *runner) children(ctx context.Context) error {
	n := b.sc.Children
	if b.o.Children > 0 {
		n = b.o.Children
	}
	var lanes []string
	for i := range (n + childrenPerLane - 1) / childrenPerLane {
		lanes = append(lanes, fmt.Sprintf("k%04d", i))
	}
	db, err := b.createDatabase(ctx, "children", lanes, childrenPerLane)
	if err != nil {
		return err
	}
	defer db.drop(ctx, b)
	prog, err := exec.LookPath("sleep")
	if err != nil {
		return fmt.Errorf("find the program sleep: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	r := childrenResult{N: n, Quarter: n / 4, Lease: b.sc.ChildrenLease, Heartbeat: b.sc.ChildrenLease / 3, KillGrace: 2 * time.Second}
	body := fmt.Sprintf("agent \"sleeper\" {\n  command  = [%q, \"3600\"]\n  schedule = \"@every 1s\"\n  lanes    = [%s]\n  parallel = %d\n  lease = %q\n  kill_grace = %q\n}\n"+
		"ui {\n  listen = \"127.0.0.1:%d\"\n}\n", prog, quoteList(lanes), n, r.Lease.String(), r.KillGrace.String(), port)
	d, err := b.startDaemon(ctx, db.url(daemonApp), "qd-bench-"+b.id+"-children", body)
	if err != nil {
		return err
	}
	defer d.stop(b)
	if err := sleepCtx(ctx, 2*time.Second); err != nil {
		return err
	}
	if err := b.fitCaps(ctx, d, &r); err != nil {
		return err
	}
	n = r.N
	if r.RSS0, _, err = readRSS(d.pid()); err != nil {
		return err
	}
	r.FDs0 = countFDs(d.pid())
	t0 := time.Now()
	if err := b.holdChildren(ctx, db, d, lanes, 0, r.Quarter); err != nil {
		return err
	}
	if r.CPUQuarter, _, err = b.idleWhile(ctx, d, nil); err != nil {
		return err
	}
	if err := b.holdChildren(ctx, db, d, lanes, r.Quarter, n); err != nil {
		return err
	}
	r.StartAll = time.Since(t0)
	if r.RSS, _, err = readRSS(d.pid()); err != nil {
		return err
	}
	r.FDs = countFDs(d.pid())
	lag := &leaseLag{heartbeat: r.Heartbeat}
	if r.CPUN, r.Beats, err = b.idleWhile(ctx, d, func(ctx context.Context) error { return lag.sample(ctx, db) }); err != nil {
		return err
	}
	r.Window = b.sc.ChildrenIdle
	r.LagWorst, r.LagP99, r.Renewals, r.LeastLeft = lag.result()
	if r.Status, err = b.timeStatus(ctx, d); err != nil {
		return err
	}
	if r.StatusAll, err = b.timeStatus(ctx, d, "--runs", "all"); err != nil {
		return err
	}
	if r.Overview, err = timeOverview(ctx, port); err != nil {
		return err
	}
	r.Drain = drainTime(d)
	b.log.Info("measured", "what", "daemon with many children", "children", n, "rss_kib", r.RSS>>10, "drain", r.Drain)
	b.childrenFigures(r)
	return nil
}

// fitCaps lowers the number of children to nine tenths of what the
// tightest limit qd status names allows (open files, processes), saying
// so in the report: a daemon cannot hold more on this machine.
func (b *runner) fitCaps(ctx context.Context, d *daemonProc, r *childrenResult) error {
	snap, err := d.fetch(ctx)
	if err != nil {
		return err
	}
	for _, c := range snap.StartCaps {
		if fit := c.Children * 9 / 10; fit < r.N {
			r.Capped = fmt.Sprintf("%s asked, but qd status says starts are capped by %s (%d) at about %s children: measured at %s",
				groupThousands(int64(r.N)), c.Limit, c.Value, groupThousands(int64(c.Children)), groupThousands(int64(fit)))
			b.log.Warn("children capped", "note", r.Capped)
			r.N = fit
		}
	}
	r.Quarter = r.N / 4
	return nil
}

// holdChildren queues tasks from..to (one per slot, spread over the
// lanes) and waits until the daemon runs a child for each.
func (b *runner) holdChildren(ctx context.Context, db *database, d *daemonProc, lanes []string, from, to int) error {
	var taskLanes []string
	for i := from; i < to; i++ {
		taskLanes = append(taskLanes, lanes[i/childrenPerLane])
	}
	_, err := db.queue.Pool().Exec(ctx, db.sql(`INSERT INTO {s}.tasks (lane, agent, payload, payload_text, max_attempts)
		SELECT unnest($1::text[]), 'sleeper', '{}'::jsonb, '{}', 1`), taskLanes)
	if err != nil {
		return fmt.Errorf("queue %d tasks: %w", len(taskLanes), err)
	}
	b.log.Info("daemon starting children", "children", to)
	deadline := time.Now().Add(2*time.Minute + time.Duration(to)*60*time.Millisecond)
	for {
		if err := sleepCtx(ctx, time.Second); err != nil {
			return err
		}
		if err := d.alive(); err != nil {
			return err
		}
		snap, err := d.fetch(ctx)
		if err != nil {
			return err
		}
		alive := 0
		for _, r := range snap.Runs {
			if r.PID != nil && *r.PID > 0 {
				alive++
			}
		}
		if alive >= to {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon started %d of %d children in time; daemon log:\n%s", alive, to, d.logTail())
		}
	}
}

// idleWhile lets the children idle for the size's span, running sample
// alongside when given, and returns the daemon's CPU as % of a core and
// its heartbeat calls over the span.
func (b *runner) idleWhile(ctx context.Context, d *daemonProc, sample func(context.Context) error) (float64, int64, error) {
	if err := sleepCtx(ctx, 2*time.Second); err != nil { // the starts' work done
		return 0, 0, err
	}
	beats0, err := d.metric(ctx, "qd_heartbeat_duration_seconds_count")
	if err != nil {
		return 0, 0, err
	}
	c0, err := readProcCPU(d.pid())
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, b.sc.ChildrenIdle)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		if sample == nil {
			<-sctx.Done()
			errc <- nil
			return
		}
		errc <- sample(sctx)
	}()
	<-sctx.Done()
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	c1, err := readProcCPU(d.pid())
	if err != nil {
		return 0, 0, err
	}
	beats1, err := d.metric(ctx, "qd_heartbeat_duration_seconds_count")
	if err != nil {
		return 0, 0, err
	}
	return 100 * (c1.Self - c0.Self).Seconds() / time.Since(start).Seconds(), int64(beats1 - beats0), nil
}

// timeStatus runs `qd status` (with args) against the daemon a few times
// and returns how long each took, sorted: the process, the socket's answer
// and the table.
func (b *runner) timeStatus(ctx context.Context, d *daemonProc, args ...string) ([]time.Duration, error) {
	var out []time.Duration
	for range 5 {
		cmd := exec.CommandContext(ctx, b.o.QD, append([]string{"status", "--socket", d.socket}, args...)...)
		cmd.Env = daemonEnv("")
		t0 := time.Now()
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("qd status: %w: %s", err, b)
		}
		out = append(out, time.Since(t0))
	}
	slices.Sort(out)
	return out, nil
}

// timeOverview fetches the dashboard's overview (its JSON) a few times.
func timeOverview(ctx context.Context, port int) ([]time.Duration, error) {
	var out []time.Duration
	url := fmt.Sprintf("http://127.0.0.1:%d/api/overview", port)
	for range 5 {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("dashboard overview: %w", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("dashboard overview: %s", resp.Status)
		}
		out = append(out, time.Since(t0))
	}
	slices.Sort(out)
	return out, nil
}

// drainTime sends SIGTERM and returns how long the daemon took to exit.
func drainTime(d *daemonProc) time.Duration {
	t0 := time.Now()
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(2 * time.Minute):
	}
	return time.Since(t0)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// countFDs counts the open files of pid.
func countFDs(pid int) int {
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	return len(ents)
}

func (b *runner) childrenFigures(r childrenResult) {
	sec := b.r.Section("children", "One daemon holding many children")
	sec.Shape = fmt.Sprintf("%s children (sleep 3600) of one agent, %d per lane, lease %s (heartbeat %s), kill_grace %s; "+
		"memory: VmRSS with all of them less VmRSS before the first; CPU from /proc/<pid>/stat over %s while they idle, at a quarter of them and at all; "+
		"lease lag: for each renewal seen in the runs' last_heartbeat_at (sampled every %s), how much later than one heartbeat interval after the one before it came; "+
		"qd status: the command run 5 times (process, socket, the table of the 100 oldest runs), and as many with --runs all (every run); the overview: GET /api/overview 5 times; drain: SIGTERM to exit; all %s started in %s",
		groupThousands(int64(r.N)), childrenPerLane, r.Lease, r.Heartbeat, r.KillGrace, b.sc.ChildrenIdle, r.Heartbeat/4,
		groupThousands(int64(r.N)), r.StartAll.Round(100*time.Millisecond))
	if r.Capped != "" {
		sec.Shape += "; " + r.Capped
	}
	name := groupThousands(int64(r.N)) + " live children"
	sec.Add(name, "daemon_rss_kib_per_child", float64(r.RSS-r.RSS0)/1024/float64(r.N), "KiB").Want("<=", 50)
	sec.Add(name, "daemon_rss_mib", float64(r.RSS)/(1<<20), "MiB")
	sec.Add(name, "open_files_per_child", float64(r.FDs-r.FDs0)/float64(r.N), "fds")
	q := sec.Add(groupThousands(int64(r.Quarter))+" live children", "idle_cpu_percent", r.CPUQuarter, "%")
	all := sec.Add(name, "idle_cpu_percent", r.CPUN, "%")
	perChild := func(cpu float64, n int) float64 { return cpu * 1e4 / float64(n) } // µs of CPU per child per second
	qp := sec.Add(groupThousands(int64(r.Quarter))+" live children", "idle_cpu_us_per_child_second", perChild(q.Value, r.Quarter), "µs")
	ap := sec.Add(name, "idle_cpu_us_per_child_second", perChild(all.Value, r.N), "µs")
	if qp.Value > 0 {
		ap.Against(*qp).Want("<=", 1)
	}
	sec.Add(name, "heartbeat_calls_per_interval", float64(r.Beats)*r.Heartbeat.Seconds()/r.Window.Seconds(), "calls")
	sec.Add(name, "lease_renewals_seen", float64(r.Renewals), "renewals")
	sec.Add(name, "lease_lag_worst_ms", ms(r.LagWorst), "ms")
	sec.Add(name, "lease_lag_p99_ms", ms(r.LagP99), "ms").Want("<=", 1000)
	sec.Add(name, "least_lease_left_s", r.LeastLeft.Seconds(), "s")
	sec.Add(name, "qd_status_p50_ms", ms(r.Status[len(r.Status)/2]), "ms")
	sec.Add(name, "qd_status_max_ms", ms(r.Status[len(r.Status)-1]), "ms").Want("<=", 100)
	sec.Add(name, "qd_status_all_runs_p50_ms", ms(r.StatusAll[len(r.StatusAll)/2]), "ms")
	sec.Add(name, "overview_p50_ms", ms(r.Overview[len(r.Overview)/2]), "ms")
	sec.Add(name, "overview_max_ms", ms(r.Overview[len(r.Overview)-1]), "ms").Want("<=", 200)
	sec.Add(name, "drain_seconds", r.Drain.Seconds(), "s").Want("<=", (r.KillGrace + 5*time.Second).Seconds())
}
