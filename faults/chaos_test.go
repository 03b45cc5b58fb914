package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// chaosNode is one daemon of the randomised run and the proxy in front of
// its database connection (nil for a direct one).
type chaosNode struct {
	name string
	px   *proxy
	d    *testkit.Daemon
}

// Ensure the invariants hold while random faults hit three daemons sharing
// one queue: blackholed and refused networks (some longer than the lease),
// kill -9 and SIGTERM with restarts, terminated backends and short pauses.
// The choices come from the printed seed; -soak makes the run long.
func TestChaos_Randomised(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rnd := rng(t)
	t.Logf("seed %d (replay with -seed %d)", seed, seed)
	lanes, tasks, span := 8, 48, 20*time.Second
	if *soak {
		lanes, tasks, span = 30, 400, 4*time.Minute
	}
	for i := range lanes {
		r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ($1, $2)`, r.schema), fmt.Sprintf("c%02d", i), 1+i%2)
	}
	// Where runs have cgroups, a quarter of the agents also start a
	// grandchild that leaves their process group (setsid): the audit counts
	// it as an orphan unless it dies with its run.
	setsid := false
	enqueue := func(n int) {
		for range n {
			mode := "sleep"
			if setsid && rnd.IntN(4) == 0 {
				mode = "setsid"
			}
			r.enqueue(fmt.Sprintf("c%02d", rnd.IntN(lanes)), "w", fmt.Sprintf(`{"mode":%q,"ms":%d}`, mode, 200+rnd.IntN(3000)), 20)
		}
	}
	// A third now, the rest spread over the faults, so work is always in
	// flight when one hits.
	enqueue(tasks / 3)
	left := tasks - tasks/3
	body := r.agentHCL(agentConf{name: "w", parallel: 4, lease: "4s", heartbeat: "1s"})
	nodes := make([]*chaosNode, 3)
	for i := range nodes {
		n := &chaosNode{name: fmt.Sprintf("chaos-%d", i)}
		if i > 0 {
			n.px = newProxy(t, "127.0.0.1:5432")
		}
		n.d = r.daemon(n.name, body, testkit.DaemonOptions{}, n.url(r))
		nodes[i] = n
	}
	setsid = nodes[0].d.Status(t).Containment.Kind == "cgroup"
	r.restartKills = setsid
	t.Logf("setsid grandchildren in the mix: %v", setsid)
	stopAt := time.Now().Add(span)
	for time.Now().Before(stopAt) || left > 0 {
		batch := min(left, 1+rnd.IntN(max(1, tasks/8)))
		enqueue(batch)
		left -= batch
		n := nodes[rnd.IntN(len(nodes))]
		kind := []string{"partition", "pg-restart", "sigkill-daemon", "sigterm-drain", "conn-kill", "sigstop"}[rnd.IntN(6)]
		if n.px == nil && (kind == "partition" || kind == "pg-restart") {
			kind = "conn-kill"
		}
		fig.fault(kind, 1)
		var end time.Time
		switch kind {
		case "partition":
			n.px.Blackhole()
			time.Sleep(time.Duration(500+rnd.IntN(6500)) * time.Millisecond)
			end = r.dbNow()
			n.px.Restore()
		case "pg-restart":
			n.px.Refuse()
			time.Sleep(time.Duration(300+rnd.IntN(2500)) * time.Millisecond)
			end = r.dbNow()
			n.px.Restore()
		case "sigkill-daemon":
			n.d.Kill()
			time.Sleep(time.Duration(rnd.IntN(2000)) * time.Millisecond)
			n.d = r.daemon(n.name, body, testkit.DaemonOptions{Dir: n.d.Dir}, n.url(r))
			end = r.dbNow()
		case "sigterm-drain":
			n.d.Signal(syscall.SIGTERM)
			n.d.Wait(t, 30*time.Second)
			n.d = r.daemon(n.name, body, testkit.DaemonOptions{Dir: n.d.Dir}, n.url(r))
			end = r.dbNow()
		case "conn-kill":
			var killed int
			r.scalar(&killed, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
				WHERE application_name = 'qd' AND query LIKE '%' || $1 || '%' ORDER BY random() LIMIT 1) x`, r.schema)
			end = r.dbNow()
		case "sigstop":
			n.d.Signal(syscall.SIGSTOP)
			time.Sleep(time.Duration(100+rnd.IntN(500)) * time.Millisecond) // well inside the lease margin
			n.d.Signal(syscall.SIGCONT)
			end = r.dbNow()
		}
		if d, ok := r.tryRecovery(n.name, end, 5*time.Second); ok {
			fig.recovered("chaos "+kind, d)
		}
		time.Sleep(time.Duration(200+rnd.IntN(1500)) * time.Millisecond)
	}
	r.verify(expect{timeout: 3 * time.Minute})
}

func (n *chaosNode) url(r *rig) string {
	if n.px == nil {
		return r.url
	}
	return r.viaURL(n.px.Addr())
}

// tryRecovery is waitHeartbeat that gives up quietly: the daemon may have
// had nothing to heartbeat or claim.
func (r *rig) tryRecovery(owner string, since time.Time, timeout time.Duration) (time.Duration, bool) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var at *time.Time
		err := r.pool.QueryRow(ctx, r.expand(`SELECT min(last_heartbeat_at) FROM {s}.runs WHERE owner = $1 AND last_heartbeat_at > $2`), owner, since).Scan(&at)
		cancel()
		if err == nil && at != nil {
			return at.Sub(since), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, false
}
