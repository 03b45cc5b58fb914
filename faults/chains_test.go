package faults

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
)

// Ensure chains survive daemons that die and a database that goes away:
// three daemons run fifty chains of five workers and a reducer enqueued
// after them, while one daemon is killed with SIGKILL and started again
// and, later, the database goes away for every daemon at once for three
// seconds (each daemon's proxy drops its connections and refuses new
// ones, as a restarting server does). No reducer run starts before every worker it
// waits for has ended done (by the agents' own audit, apart from qd's
// records), no task is lost, and none is left waiting.
func TestChains_DaemonsDieAndDatabaseGoes(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const chains, workers = 50, 5
	for i := range 10 {
		r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ($1, 2)`, r.schema), fmt.Sprintf("w%02d", i))
	}
	r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ('red', 4)`, r.schema))
	body := r.agentHCL(agentConf{name: "w", parallel: 4, lease: "4s", heartbeat: "1s", lanes: lanesW()}) +
		r.agentHCL(agentConf{name: "r", parallel: 2, lease: "4s", heartbeat: "1s", lanes: []string{"red"}})
	nodes := make([]*chaosNode, 3)
	for i := range nodes {
		n := &chaosNode{name: fmt.Sprintf("chain-%d", i), px: newProxy(t, "127.0.0.1:5432")}
		n.d = r.daemon(n.name, body, testkit.DaemonOptions{}, n.url(r))
		nodes[i] = n
	}
	r.restartKills = nodes[0].d.Status(t).Containment.Kind == "cgroup"
	ctx := context.Background()
	var reducers []int64
	late := map[int64][]int64{} // reducers enqueued later: their workers
	for c := range chains {
		var ids []int64
		for w := range workers {
			ids = append(ids, r.enqueue(fmt.Sprintf("w%02d", (c+w)%10), "w", fmt.Sprintf(`{"mode":"sleep","ms":%d}`, 150+(c*37+w*91)%700), 20))
		}
		if c%3 == 2 { // after a while, when some of its workers may be done
			late[int64(c)] = ids
			continue
		}
		reducers = append(reducers, r.enqueueAfter(ctx, ids))
		if c == chains/3 {
			fig.fault("sigkill-daemon", 1)
			nodes[0].d.Kill()
			nodes[0].d = r.daemon(nodes[0].name, body, testkit.DaemonOptions{Dir: nodes[0].d.Dir}, nodes[0].url(r))
		}
		if c == 2*chains/3 {
			fig.fault("pg-restart", 1)
			for _, n := range nodes {
				n.px.Refuse()
			}
			time.Sleep(3 * time.Second)
			for _, n := range nodes {
				n.px.Restore()
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second)
	for _, ids := range late {
		reducers = append(reducers, r.enqueueAfter(ctx, ids))
	}
	r.verify(expect{timeout: 3 * time.Minute})
	early, gap := r.chainOrder()
	var stuck int
	r.scalar(&stuck, `SELECT count(*) FROM {s}.tasks WHERE state = 'waiting'`)
	if early > 0 {
		t.Errorf("%d reducer runs started before every worker they wait for ended done", early)
	}
	if len(reducers) != chains {
		t.Fatalf("%d reducers enqueued, want %d", len(reducers), chains)
	}
	fig.add(func(f *figures) {
		f.chains += chains
		f.chainEarly += early
		f.chainStuck += stuck
		if f.chainGap == 0 || gap < f.chainGap {
			f.chainGap = gap
		}
	})
	for _, n := range nodes {
		n.d.Signal(syscall.SIGTERM)
	}
}

func lanesW() []string {
	out := make([]string, 10)
	for i := range out {
		out[i] = fmt.Sprintf("w%02d", i)
	}
	return out
}

// enqueueAfter adds a reducer that waits for ids.
func (r *rig) enqueueAfter(ctx context.Context, ids []int64) int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	id, _, err := r.prov.Enqueue(ctx, lease.EnqueueParams{Lane: "red", Agent: "r", Payload: []byte(`{"mode":"sleep","ms":100}`),
		MaxAttempts: 20, After: ids})
	if err != nil {
		r.t.Fatalf("enqueue a reducer after %v: %v", ids, err)
	}
	return id
}

// chainOrder counts, by the agents' audit, the starts of dependents'
// runs that came before the end of the completed run of every task they
// wait for, and returns the shortest gap between the two.
func (r *rig) chainOrder() (early int, gap time.Duration) {
	r.t.Helper()
	var us *int64
	r.scalar(&early, `SELECT count(*) FROM {s}.audit s WHERE s.event = 'start' AND EXISTS (
		SELECT 1 FROM {s}.task_deps d WHERE d.task_id = s.task_id AND NOT EXISTS (
			SELECT 1 FROM {s}.audit e JOIN {s}.runs p ON p.id = e.run_id AND p.state = 'completed'
			WHERE e.task_id = d.parent_id AND e.event = 'end' AND e.at < s.at))`)
	r.scalar(&us, `SELECT (extract(epoch FROM min(s.at - e.last)) * 1e6)::bigint FROM {s}.audit s
		JOIN LATERAL (SELECT max(e.at) AS last FROM {s}.task_deps d JOIN {s}.audit e ON e.task_id = d.parent_id AND e.event = 'end'
			JOIN {s}.runs p ON p.id = e.run_id AND p.state = 'completed' WHERE d.task_id = s.task_id) e ON true
		WHERE s.event = 'start' AND e.last IS NOT NULL`)
	if us != nil {
		gap = time.Duration(*us) * time.Microsecond
	}
	return early, gap
}
