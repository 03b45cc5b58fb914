package ui

import (
	"context"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

// Overview is the overview page and its JSON twin.
type Overview struct {
	Lanes     []LaneRow     `json:"lanes"`
	Agents    []AgentRow    `json:"agents"`
	Periodics []PeriodicRow `json:"periodics"`
	Runs      []RunRow      `json:"runs"`
	Daemons   []DaemonRow   `json:"daemons"`
	// Recent are the latest tasks enqueued.
	Recent []TaskRow `json:"recent_tasks"`
}

// AgentRow is one agent of one daemon. Schedule, NextTick and Parallel
// come from the daemon's socket, and are empty when it cannot be reached.
type AgentRow struct {
	Name     string    `json:"name"`
	Daemon   string    `json:"daemon"`
	Schedule string    `json:"schedule,omitempty"`
	NextTick time.Time `json:"next_tick,omitzero"`
	Parallel int       `json:"parallel,omitempty"`
	Running  int       `json:"running"`
	Lanes    []string  `json:"lanes,omitempty"`
	Live     bool      `json:"from_socket"`
	Last     *LastRow  `json:"last,omitempty"`
}

// LastRow is how an agent's last run ended.
type LastRow struct {
	RunID   int64     `json:"run_id"`
	TaskID  int64     `json:"task_id"`
	Outcome string    `json:"outcome"`
	Summary string    `json:"summary"`
	At      time.Time `json:"at"`
}

// PeriodicRow is a periodic schedule; its schedule and next tick come from
// a daemon's socket, its last tick from the queue.
type PeriodicRow struct {
	Name     string    `json:"name"`
	Schedule string    `json:"schedule,omitempty"`
	Agent    string    `json:"agent,omitempty"`
	Lane     string    `json:"lane,omitempty"`
	NextTick time.Time `json:"next_tick,omitzero"`
	LastTick time.Time `json:"last_tick,omitzero"`
}

// RunRow is a run in flight.
type RunRow struct {
	RunID         int64     `json:"run_id"`
	TaskID        int64     `json:"task_id"`
	Lane          string    `json:"lane"`
	Agent         string    `json:"agent"`
	Attempt       int       `json:"attempt"`
	PID           int       `json:"pid"`
	StartedAt     time.Time `json:"started_at"`
	AgeSeconds    float64   `json:"age_seconds"`
	SilentSeconds float64   `json:"silent_seconds"`
	LeaseLeft     float64   `json:"lease_left_seconds"`
	// CPUSeconds is the run's CPU time so far, as its daemon reads it from
	// the run's cgroup; absent without one, or when the daemon's socket
	// cannot be reached from here.
	CPUSeconds *float64 `json:"cpu_seconds,omitempty"`
	Owner      string   `json:"owner"`
	Host       string   `json:"host"`
	// Silence is "ok", "warn" (past half the lease) or "late" (past 80%).
	Silence string `json:"silence"`
}

// CPU shows the run's CPU time so far; "-" when it is not known.
func (r RunRow) CPU() string {
	if r.CPUSeconds == nil {
		return "-"
	}
	return secs(*r.CPUSeconds)
}

// DaemonRow is a daemon sharing the queue and whether its socket answered.
type DaemonRow struct {
	Name      string  `json:"name"`
	Host      string  `json:"host"`
	SeenAgo   float64 `json:"seen_seconds_ago"`
	Reachable bool    `json:"socket_reachable"`
	Error     string  `json:"error,omitempty"`
}

// snapshots asks every daemon on this host for its status, at once and
// briefly; the others are listed without one.
func (s *server) snapshots(ctx context.Context) ([]Daemon, map[string]*api.Snapshot, []DaemonRow) {
	if s.o.Daemons == nil {
		return nil, nil, []DaemonRow{}
	}
	ds, err := s.o.Daemons(ctx)
	if err != nil {
		return nil, nil, []DaemonRow{{Name: "?", Error: scrub(err)}}
	}
	snaps := map[string]*api.Snapshot{}
	rows := make([]DaemonRow, len(ds))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, d := range ds {
		rows[i] = DaemonRow{Name: d.Name, Host: d.Host, SeenAgo: d.SeenAgo.Seconds()}
		if d.Host != s.o.Hostname || d.Socket == "" {
			rows[i].Error = "on another host"
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			snap, err := api.Client{Path: d.Socket}.Status(ctx)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rows[i].Error = scrub(err)
				return
			}
			rows[i].Reachable = true
			snaps[d.Name] = snap
		}()
	}
	wg.Wait()
	return ds, snaps, rows
}

func (s *server) overview(r *http.Request) (any, error) {
	ctx := r.Context()
	lanes, err := s.o.Store.Lanes(ctx)
	if err != nil {
		return nil, err
	}
	runs, err := s.o.Store.LiveRuns(ctx)
	if err != nil {
		return nil, err
	}
	recent, err := s.o.Store.FindTasks(ctx, lease.TaskQuery{Limit: 10})
	if err != nil {
		return nil, err
	}
	ds, snaps, drows := s.snapshots(ctx)
	o := &Overview{Lanes: laneRows(lanes), Daemons: drows, Recent: taskRows(recent), Runs: []RunRow{}}
	hosts := map[string]string{}
	for _, d := range ds {
		hosts[d.Name] = d.Host
	}
	live := map[int64]api.RunStatus{}
	for _, snap := range snaps {
		for _, rs := range snap.Runs {
			live[rs.RunID] = rs
		}
	}
	for _, run := range runs {
		o.Runs = append(o.Runs, runRow(run, hosts[run.Owner], live))
	}
	if o.Agents, err = s.agents(ctx, ds, snaps); err != nil {
		return nil, err
	}
	if o.Periodics, err = s.periodics(ctx, snaps); err != nil {
		return nil, err
	}
	return o, nil
}

func runRow(run lease.Run, host string, live map[int64]api.RunStatus) RunRow {
	row := RunRow{RunID: run.ID, TaskID: run.TaskID, Lane: run.Lane, Agent: run.Agent, Attempt: run.Attempt,
		PID: run.PID, StartedAt: run.StartedAt, AgeSeconds: time.Since(run.StartedAt).Seconds(),
		SilentSeconds: run.SilentSeconds, LeaseLeft: run.LeaseLeft.Seconds(), Owner: run.Owner, Host: host}
	if rs, ok := live[run.ID]; ok { // the daemon's own count, on its monotonic clock
		row.PID, row.AgeSeconds = rs.PID, rs.AgeSeconds
		row.SilentSeconds, row.LeaseLeft = rs.SilentSeconds, rs.LeaseLeftSeconds
		row.CPUSeconds = rs.CPUSeconds
	}
	row.Silence = "ok"
	if total := row.SilentSeconds + row.LeaseLeft; total > 0 {
		switch f := row.SilentSeconds / total; {
		case f >= 0.8:
			row.Silence = "late"
		case f >= 0.5:
			row.Silence = "warn"
		}
	}
	return row
}

// agents lists each daemon's agents: from its socket when it answered,
// else its names from the queue with their last outcomes there.
func (s *server) agents(ctx context.Context, ds []Daemon, snaps map[string]*api.Snapshot) ([]AgentRow, error) {
	var out []AgentRow
	var names []string
	for _, d := range ds {
		if snap, ok := snaps[d.Name]; ok {
			for _, a := range snap.Agents {
				row := AgentRow{Name: a.Name, Daemon: d.Name, Schedule: a.Schedule, NextTick: a.NextTick,
					Parallel: a.Parallel, Running: a.Running, Lanes: a.Lanes, Live: true}
				if a.Last != nil {
					row.Last = &LastRow{RunID: a.Last.RunID, TaskID: a.Last.TaskID, Outcome: a.Last.Outcome,
						Summary: a.Last.Summary, At: a.Last.At}
				}
				out = append(out, row)
			}
			continue
		}
		for _, a := range d.Agents {
			out = append(out, AgentRow{Name: a, Daemon: d.Name})
			names = append(names, a)
		}
	}
	if len(names) > 0 {
		last, err := s.o.Store.LastOutcomes(ctx, names)
		if err != nil {
			return nil, err
		}
		by := map[string]lease.Run{}
		for _, r := range last {
			by[r.Agent] = r
		}
		for i := range out {
			if r, ok := by[out[i].Name]; ok && !out[i].Live {
				out[i].Last = &LastRow{RunID: r.ID, TaskID: r.TaskID, Outcome: string(r.State), Summary: r.Summary, At: r.FinishedAt}
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	if out == nil {
		out = []AgentRow{}
	}
	return out, nil
}

// periodics merges the schedules the daemons know with the last ticks the
// queue recorded.
func (s *server) periodics(ctx context.Context, snaps map[string]*api.Snapshot) ([]PeriodicRow, error) {
	recs, err := s.o.Store.PeriodicRecords(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*PeriodicRow{}
	var out []*PeriodicRow
	for _, rec := range recs {
		row := &PeriodicRow{Name: rec.Name, LastTick: rec.LastTick}
		by[rec.Name] = row
		out = append(out, row)
	}
	for _, snap := range snaps {
		for _, p := range snap.Periodics {
			row, ok := by[p.Name]
			if !ok {
				row = &PeriodicRow{Name: p.Name}
				by[p.Name] = row
				out = append(out, row)
			}
			row.Schedule, row.Agent, row.Lane = p.Schedule, p.Agent, p.Lane
			if row.NextTick.IsZero() || (!p.NextTick.IsZero() && p.NextTick.Before(row.NextTick)) {
				row.NextTick = p.NextTick
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	rows := make([]PeriodicRow, len(out))
	for i, r := range out {
		rows[i] = *r
	}
	return rows, nil
}
