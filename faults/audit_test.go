package faults

import (
	"fmt"
	"sort"
	"syscall"
	"time"
)

// tickSlack is how long after its last audit event a process that wrote no
// end may still have lived: agents tick every 100ms.
const tickSlack = 300 * time.Millisecond

// span is the life of one run as the audit saw it, grandchildren included.
type span struct {
	task, run   int64
	lane        string
	start, last time.Time
	ended       bool // the agent wrote its end and spawned nothing
	spawned     bool
	// settled is when the run's own supervisor settled it, which it does
	// only once the child has exited and its group was killed, or, where
	// runs are in cgroups, when its restarted supervisor abandoned it
	// after killing its cgroup; zero when the run was reaped or abandoned
	// by someone else, or is unsettled.
	settled time.Time
}

// end is the latest the run's processes may have lived: the last event,
// plus one tick when the end was not seen, but no later than the owner's
// settlement.
func (s *span) end() time.Time {
	if s.ended && !s.spawned {
		return s.last
	}
	e := s.last.Add(tickSlack)
	if !s.settled.IsZero() && s.settled.After(s.last) && s.settled.Before(e) {
		e = s.settled
	}
	return e
}

func (r *rig) spans() []*span {
	r.t.Helper()
	// A run is found by its id and its agent's pid: a database that lost
	// runs (a failover to a copy behind) gives their ids out again. Events
	// of another pid without a start are its grandchildren's.
	type key struct {
		run int64
		pid int
	}
	byRun := map[int64]*span{}
	byPID := map[key]*span{}
	var out []*span
	var task, run int64
	var pid int
	var lane, ev string
	var at time.Time
	r.eachRow(`SELECT task_id, run_id, pid, lane, event, at FROM {s}.audit ORDER BY at`, func() {
		s := byPID[key{run, pid}]
		if s == nil && ev != "start" {
			s = byRun[run]
		}
		if s == nil {
			s = &span{task: task, run: run, lane: lane, start: at}
			byRun[run] = s
			byPID[key{run, pid}] = s
			out = append(out, s)
		}
		s.last = at
		switch ev {
		case "end":
			s.ended = true
		case "spawn":
			s.spawned = true
		}
	}, &task, &run, &pid, &lane, &ev, &at)
	var id int64
	var finished time.Time
	restarted := "AND coalesce(summary, '') <> 'supervisor restarted'"
	if r.restartKills {
		restarted = ""
	}
	r.eachRow(`SELECT id, finished_at FROM {s}.runs
		WHERE finished_at IS NOT NULL AND coalesce(summary, '') NOT LIKE 'lease expired%' `+restarted, func() {
		if s := byRun[id]; s != nil {
			s.settled = finished
		}
	}, &id, &finished)
	return out
}

// overlaps finds runs of one task that lived at once: how many, and the
// longest window.
func overlaps(spans []*span) (n int, longest time.Duration, what []string) {
	byTask := map[int64][]*span{}
	for _, s := range spans {
		byTask[s.task] = append(byTask[s.task], s)
	}
	for _, ss := range byTask {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		var prev *span
		for _, s := range ss {
			if prev != nil && prev.end().After(s.start) {
				n++
				w := earliest(prev.end(), s.end()).Sub(s.start)
				longest = max(longest, w)
				what = append(what, fmt.Sprintf("task %d: run %d overlaps run %d by %s", s.task, prev.run, s.run, w))
			}
			if prev == nil || s.end().After(prev.end()) {
				prev = s
			}
		}
	}
	return n, longest, what
}

// occupancy sweeps the start and end of every run of each lane and returns
// the most runs alive at once per lane.
func occupancy(spans []*span) map[string]int {
	type edge struct {
		at time.Time
		d  int
	}
	byLane := map[string][]edge{}
	for _, s := range spans {
		byLane[s.lane] = append(byLane[s.lane], edge{s.start, +1}, edge{s.end(), -1})
	}
	out := map[string]int{}
	for lane, es := range byLane {
		sort.Slice(es, func(i, j int) bool {
			if !es[i].at.Equal(es[j].at) {
				return es[i].at.Before(es[j].at)
			}
			return es[i].d < es[j].d
		})
		cur, top := 0, 0
		for _, e := range es {
			cur += e.d
			top = max(top, cur)
		}
		out[lane] = top
	}
	return out
}

// expect says how a scenario must end.
type expect struct {
	def     string           // final state of every task (default done)
	states  map[int64]string // per-task exceptions
	pause   bool             // overlaps are the paused-daemon window: reported, not failures
	timeout time.Duration    // for the tasks to settle (default 60s)
}

// verify waits for the tasks to settle and checks every invariant, adding
// the scenario's counters to the figures. Violations fail the test.
func (r *rig) verify(e expect) {
	r.t.Helper()
	if e.def == "" {
		e.def = "done"
	}
	if e.timeout == 0 {
		e.timeout = 60 * time.Second
	}
	lost := r.waitStates(e.def, e.states, e.timeout)
	spans := r.spans()
	dups, longest, what := overlaps(spans)
	if dups > 0 && !e.pause {
		r.t.Errorf("%d concurrent duplicates: %v", dups, what)
	}
	limits := r.laneLimits()
	over := 0
	for lane, occ := range occupancy(spans) {
		limit, ok := limits[lane]
		if !ok {
			limit = 1 // a lane the queue does not hold (a copy behind lost it) has the default
		}
		if e.pause {
			// The paused daemon's window is counted above as an overlap.
			continue
		}
		fig.lane(lane, occ, limit)
		if occ > limit {
			over++
			r.t.Errorf("lane %s had %d runs at once, limit %d", lane, occ, limit)
		}
	}
	stale := r.staleApplied()
	if stale > 0 {
		r.t.Errorf("%d tasks show a stale write applied (state disagrees with their runs)", stale)
	}
	orphans := r.orphans()
	var tasks, runs, reruns int
	r.scalar(&tasks, `SELECT count(*) FROM {s}.tasks`)
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	r.scalar(&reruns, `SELECT count(*) FROM {s}.runs r WHERE EXISTS (
		SELECT 1 FROM {s}.runs p WHERE p.task_id = r.task_id AND p.id < r.id AND p.state = 'abandoned')`)
	fig.add(func(f *figures) {
		f.tasks += tasks
		f.runs += runs
		f.reruns += reruns
		f.lost += lost
		f.staleApplied += stale
		f.orphans += orphans
		if e.pause {
			f.pauseOverlaps += dups
			f.pauseMax = max(f.pauseMax, longest)
		} else {
			f.duplicates += dups
		}
	})
}

func (r *rig) laneLimits() map[string]int {
	m := map[string]int{}
	var name string
	var n int
	r.eachRow(`SELECT name, max_running FROM {s}.lanes`, func() { m[name] = n }, &name, &n)
	return m
}

// staleApplied counts tasks whose record shows a write from a run that was
// no longer live: two completed runs, a task state that disagrees with its
// runs, or a run settled after a later run of its task had started.
func (r *rig) staleApplied() int {
	var n int
	r.scalar(&n, `SELECT count(*) FROM {s}.tasks t WHERE
		(SELECT count(*) FROM {s}.runs r WHERE r.task_id = t.id AND r.state = 'completed') > 1
		OR (t.state = 'done') <> EXISTS (SELECT 1 FROM {s}.runs r WHERE r.task_id = t.id AND r.state = 'completed')
		OR (t.state = 'running') <> EXISTS (SELECT 1 FROM {s}.runs r WHERE r.task_id = t.id AND r.state = 'running')
		OR EXISTS (SELECT 1 FROM {s}.runs a JOIN {s}.runs b ON b.task_id = a.task_id AND b.id > a.id
		           WHERE a.task_id = t.id AND a.state IN ('completed', 'failed') AND a.finished_at > b.started_at)`)
	return n
}

// orphans waits a little for every audited process to be gone, then kills
// and counts what is left.
func (r *rig) orphans() int {
	deadline := time.Now().Add(3 * time.Second)
	for {
		live := r.liveAudited()
		if len(live) == 0 {
			return 0
		}
		if time.Now().After(deadline) {
			for _, pid := range live {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
			r.t.Errorf("%d agent processes (or grandchildren) outlived their runs", len(live))
			return len(live)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func earliest(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
