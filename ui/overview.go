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
	Lanes     []api.Lane     `json:"lanes"`
	Agents    []AgentRow     `json:"agents"`
	Periodics []api.Periodic `json:"periodics"`
	Runs      []RunRow       `json:"runs"`
	Daemons   []DaemonRow    `json:"daemons"`
	// Recent are the latest tasks enqueued.
	Recent []api.Task `json:"recent_tasks"`
	// Limits and Budgets are the queue's rate limits and budgets
	// (docs/limits.md).
	Limits  []api.Limit  `json:"limits"`
	Budgets []api.Budget `json:"budgets"`
}

// AgentRow is one agent of one daemon. Schedule, NextTick and Parallel
// come from the daemon's socket, and are empty when it cannot be reached.
type AgentRow struct {
	Name     string           `json:"name"`
	Daemon   string           `json:"daemon"`
	Schedule string           `json:"schedule,omitempty"`
	NextTick time.Time        `json:"next_tick,omitzero"`
	Parallel int              `json:"parallel,omitempty"`
	Running  int              `json:"running"`
	Lanes    []string         `json:"lanes,omitempty"`
	Live     bool             `json:"from_socket"`
	Last     *api.LastOutcome `json:"last,omitempty"`
	// Box is what keeps its runs in, from the daemon's socket.
	Box *api.BoxStatus `json:"box,omitempty"`
	// Paused says when and by whom the agent was paused (qd agent pause);
	// null when its tasks are claimed.
	Paused *api.AgentPause `json:"paused"`
}

// RunRow is a run in flight: in the JSON the run as its daemon's socket
// has it (`qd status --json`), or as the queue has it when no daemon here
// can be asked; on the page also where its daemon is and how late its
// heartbeat is.
type RunRow struct {
	api.LiveRun
	// Host is the host of the daemon that runs it, as the queue's daemons
	// table says; the JSON has it under daemons.
	Host string `json:"-"`
	// Silence is "ok", "warn" (past half the lease) or "late" (past 80%).
	Silence string `json:"-"`
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
	limits, err := s.o.Store.Limits(ctx)
	if err != nil {
		return nil, err
	}
	budgets, err := s.o.Store.Budgets(ctx)
	if err != nil {
		return nil, err
	}
	ds, snaps, drows := s.snapshots(ctx)
	o := &Overview{Lanes: list(lanes, api.LaneOf), Daemons: drows, Recent: list(recent, api.TaskOf), Runs: []RunRow{},
		Limits: list(limits, api.LimitOf), Budgets: list(budgets, api.BudgetOf)}
	hosts := map[string]string{}
	for _, d := range ds {
		hosts[d.Name] = d.Host
	}
	live := map[int64]api.LiveRun{}
	for _, snap := range snaps {
		for _, rs := range snap.Runs {
			live[rs.RunID] = rs
		}
	}
	now := time.Now()
	for _, run := range runs {
		o.Runs = append(o.Runs, runRow(run, hosts[run.Owner], live, now))
	}
	if o.Agents, err = s.agents(ctx, ds, snaps); err != nil {
		return nil, err
	}
	if o.Periodics, err = s.periodics(ctx, snaps); err != nil {
		return nil, err
	}
	return o, nil
}

// runRow is the live run as its daemon counts it when the daemon answered
// (its own clock), else as the queue has it.
func runRow(run lease.Run, host string, live map[int64]api.LiveRun, now time.Time) RunRow {
	lr, ok := live[run.ID]
	if !ok {
		lr = api.LiveRunOf(run, now)
	}
	row := RunRow{LiveRun: lr, Host: host, Silence: "ok"}
	if total := row.SilentSeconds + row.LeaseLeftSeconds; total > 0 {
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
					Parallel: a.Parallel, Running: a.Running, Lanes: a.Lanes, Live: true, Box: a.Box}
				row.Last = a.Last
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
				last := api.LastOutcomeOf(r)
				out[i].Last = &last
			}
		}
	}
	paused, err := s.o.Store.PausedAgents(ctx)
	if err != nil {
		return nil, err
	}
	for _, p := range paused {
		for i := range out {
			if out[i].Name == p.Agent {
				w := api.AgentPauseOf(p)
				out[i].Paused = &w
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
// queue recorded; a schedule's next tick is the soonest any daemon has.
func (s *server) periodics(ctx context.Context, snaps map[string]*api.Snapshot) ([]api.Periodic, error) {
	recs, err := s.o.Store.PeriodicRecords(ctx)
	if err != nil {
		return nil, err
	}
	by := map[string]*api.Periodic{}
	for _, rec := range recs {
		p := api.PeriodicOf(rec)
		by[rec.Name] = &p
	}
	for _, snap := range snaps {
		for _, p := range snap.Periodics {
			row, ok := by[p.Name]
			if !ok {
				row = &api.Periodic{Name: p.Name}
				by[p.Name] = row
			}
			row.Schedule, row.Agent, row.Lane = p.Schedule, p.Agent, p.Lane
			if row.NextTick == nil || (p.NextTick != nil && p.NextTick.Before(*row.NextTick)) {
				row.NextTick = p.NextTick
			}
		}
	}
	rows := make([]api.Periodic, 0, len(by))
	for _, p := range by {
		rows = append(rows, *p)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	return rows, nil
}
