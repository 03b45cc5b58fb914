package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// laptopResult is what a daemon on its private cluster cost while nothing
// was due.
type laptopResult struct {
	Wall               time.Duration
	Wakeups, PGWakeups int64 // context switches of every thread
	DaemonCPU, PGCPU   time.Duration
	PGProcesses        int
}

// laptop measures qd as a laptop runs it: no database configured, so its
// private PostgreSQL in its state directory, and one agent on @every 1m.
// Nothing is due between ticks: the wake-ups counted are the idle loops'.
func (b *runner) laptop(ctx context.Context) error {
	prog, err := exec.LookPath("true")
	if err != nil {
		return fmt.Errorf("find the program true: %w", err)
	}
	agent := fmt.Sprintf("agent \"tick\" {\n  command  = [%q]\n  schedule = \"@every 1m\"\n}\n", prog)
	d, err := b.startDaemon(ctx, "", "qd-bench-"+b.id+"-laptop", agent)
	if err != nil {
		return err
	}
	data := filepath.Join(d.state, "pg", "data")
	defer func() { // the daemon first: it would start its cluster again
		d.halt(b)
		stopCluster(b, data)
		d.remove(b)
	}()
	b.log.Info("daemon on its private cluster", "for", b.sc.Laptop)
	if err := sleepCtx(ctx, b.sc.LaptopWarmup); err != nil {
		return err
	}
	r, err := watchLaptop(ctx, d.pid(), data, b.sc.Laptop)
	if err != nil {
		return err
	}
	if err := d.alive(); err != nil {
		return err
	}
	b.log.Info("measured", "what", "laptop daemon", "wakeups", r.Wakeups, "pg_wakeups", r.PGWakeups, "wall", r.Wall.Round(time.Millisecond))
	b.laptopFigures(r)
	return nil
}

// watchLaptop counts the context switches and CPU of the daemon and of
// every process of its cluster over span.
func watchLaptop(ctx context.Context, daemon int, data string, span time.Duration) (laptopResult, error) {
	var r laptopResult
	pg := clusterPIDs(data)
	if len(pg) == 0 {
		return r, fmt.Errorf("no server runs in the private cluster %s", data)
	}
	r.PGProcesses = len(pg)
	w0, c0 := switchesOf(daemon), cpuOf([]int{daemon})
	pw0, pc0 := sumSwitches(pg), cpuOf(pg)
	start := time.Now()
	if err := sleepCtx(ctx, span); err != nil {
		return r, err
	}
	r.Wall = time.Since(start)
	r.Wakeups = switchesOf(daemon) - w0
	r.DaemonCPU = cpuDelta(c0, cpuOf([]int{daemon}))
	r.PGWakeups = sumSwitches(pg) - pw0
	r.PGCPU = cpuDelta(pc0, cpuOf(pg))
	return r, nil
}

func (b *runner) laptopFigures(r laptopResult) {
	sec := b.r.Section("idle", "Idle cost of a daemon")
	name := "private PostgreSQL, one agent on @every 1m"
	sec.Shape += fmt.Sprintf("; %s: for %s after %s to settle, wake-ups as the context switches (voluntary and not) of every thread of the daemon, "+
		"and of the %d processes of its cluster, from /proc/<pid>/task/*/status", name, b.sc.Laptop, b.sc.LaptopWarmup, r.PGProcesses)
	sec.Add(name, "daemon_wakeups_per_second", float64(r.Wakeups)/r.Wall.Seconds(), "/s").Want("<=", 5)
	sec.Add(name, "daemon_cpu_percent", 100*r.DaemonCPU.Seconds()/r.Wall.Seconds(), "%")
	sec.Add(name, "postgres_wakeups_per_second", float64(r.PGWakeups)/r.Wall.Seconds(), "/s")
	sec.Add(name, "postgres_cpu_percent", 100*r.PGCPU.Seconds()/r.Wall.Seconds(), "%")
}

// switchesOf sums the context switches of every thread of pid; 0 when it
// is gone.
func switchesOf(pid int) int64 {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	var n int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for line := range strings.Lines(string(data)) {
			k, v, ok := strings.Cut(line, ":")
			if ok && (k == "voluntary_ctxt_switches" || k == "nonvoluntary_ctxt_switches") {
				c, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				n += c
			}
		}
	}
	return n
}

func sumSwitches(pids []int) int64 {
	var n int64
	for _, p := range pids {
		n += switchesOf(p)
	}
	return n
}

func postmasterPID(data string) (int, error) {
	b, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read the private cluster's postmaster.pid: %w", err)
	}
	first, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(first))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid in %s: %w", data, err)
	}
	return pid, nil
}

// stopCluster stops the private cluster the daemon left running (a fast
// shutdown), and waits for it.
func stopCluster(b *runner, data string) {
	pm, err := postmasterPID(data)
	if err != nil {
		return
	}
	_ = syscall.Kill(pm, syscall.SIGINT)
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if syscall.Kill(pm, 0) != nil {
			return
		}
	}
	b.log.Warn("the private cluster did not stop within 30 s", "pid", pm)
}
