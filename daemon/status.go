package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

var _ api.Daemon = (*daemon)(nil)

// Status builds what GET /v1/status serves. It reads the supervisor's
// copied state and asks the database for lane depths with a short timeout,
// so a slow database or client never holds up the heartbeat loop.
func (d *daemon) Status(ctx context.Context, runs int) api.Snapshot {
	conf := d.config()
	now := time.Now()
	s := api.Snapshot{
		Supervisor: conf.Name, Version: d.version, PID: os.Getpid(),
		StartedAt: d.started, UptimeSeconds: now.Sub(d.started).Seconds(),
	}
	d.mu.Lock()
	s.ConfigError = d.reloadErr
	lost := d.stateLost
	d.mu.Unlock()
	s.LogLinesDropped = d.logOut.Dropped()
	h := d.sup.StateDirHealth()
	s.StateDir = api.StateDirStatus{Path: conf.StateDir, WriteError: h.WriteError, WriteErrorAt: h.At, IncompleteLogs: h.IncompleteLogs, Lost: lost}
	next, nextPeriodic := d.sched.NextTicks()
	d.mu.Lock()
	last := make(map[string]api.LastOutcome, len(d.last))
	for k, v := range d.last {
		last[k] = v
	}
	d.mu.Unlock()
	for _, a := range conf.Agents {
		as := api.AgentStatus{
			Name: a.Name, Schedule: a.Schedule, NextTick: next[a.Name],
			Running: d.sup.Running(a.Name), Parallel: a.Parallel, Lanes: append([]string{}, a.Lanes...),
			Box: boxStatus(&a, d.sup.BoxSupport),
		}
		if l, ok := last[a.Name]; ok {
			as.Last = &l
		}
		s.Agents = append(s.Agents, as)
	}
	live, total := d.sup.SnapshotOldest(runs)
	for _, r := range live {
		s.Runs = append(s.Runs, liveRun(r, conf.Name, now))
	}
	s.RunsTotal = total
	s.DrainingSince = d.sup.DrainingSince()
	s.StartsHeld = d.starts.status()
	want := 0
	for _, a := range conf.Agents {
		want += a.Parallel
	}
	for _, c := range d.sup.Caps(want) {
		s.StartCaps = append(s.StartCaps, api.StartCap{Limit: c.Limit, Value: c.Value, Children: c.Children, Wanted: want})
	}
	c := d.sup.Containment()
	s.Containment = api.ContainmentStatus{Kind: c.Kind, Cgroup: c.Path, Controllers: append([]string{}, c.Controllers...), Reason: c.Reason}
	nc := d.sender.Counts()
	s.Notifications = api.NotifyCounts{Sent: nc.Sent, Failed: nc.Failed, Retried: nc.Retried}
	for _, down := range nc.Down {
		s.Notifications.Down = append(s.Notifications.Down, api.NotifyDown{Target: down.Target, Since: down.Since, Fails: down.Fails, Error: down.Error})
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	for _, p := range conf.Periodics {
		rec := lease.PeriodicRecord{Name: p.Name}
		if last, err := d.queue.PeriodicLast(ctx, p.Name); err == nil {
			rec.LastTick = last
		}
		ps := api.PeriodicOf(rec)
		ps.Schedule, ps.Agent, ps.Lane, ps.NextTick = p.Schedule, p.Agent, p.Lane, api.When(nextPeriodic[p.Name])
		s.Periodics = append(s.Periodics, ps)
	}
	if q := d.backend.Unserved; q != nil {
		if us, err := q.UnservedAgents(ctx, nameStale); err == nil {
			for _, u := range us {
				s.Unserved = append(s.Unserved, api.UnservedAgent{Agent: u.Agent, Queued: u.Queued})
			}
		}
	}
	lanes, err := d.queue.Lanes(ctx)
	d.setDBError(err)
	s.Database.Reachable = err == nil
	if w := d.backend.Server; w != nil {
		if at, why := w.ServerChange(); !at.IsZero() {
			s.Database.ServerChangedAt, s.Database.ServerChange, s.Database.ClaimsHeldUntil = at, why, at.Add(d.claimHold())
		}
	}
	if err != nil {
		s.Database.Error = err.Error()
	}
	if err == nil {
		if paused, err := d.queue.PausedAgents(ctx); err == nil {
			for _, p := range paused {
				for i := range s.Agents {
					if s.Agents[i].Name == p.Agent {
						w := api.AgentPauseOf(p)
						s.Agents[i].Paused = &w
					}
				}
			}
		}
	}
	d.spending(ctx, &s)
	for _, l := range lanes {
		ls := api.LaneStatus{Name: l.Name, MaxRunning: l.MaxRunning, Paused: l.Paused, Running: l.Running, Queued: l.Queued}
		if !l.OldestQueued.IsZero() {
			ls.OldestQueuedAgeSeconds = now.Sub(l.OldestQueued).Seconds()
		}
		s.Lanes = append(s.Lanes, ls)
	}
	return s
}

// spending adds to s the limits and budgets the agents of the config use,
// as the queue has them now; nothing when it cannot be read.
func (d *daemon) spending(ctx context.Context, s *api.Snapshot) {
	conf := d.config()
	uses := map[string]bool{}
	for _, a := range conf.Agents {
		for _, l := range a.Limits {
			uses["limit "+l] = true
		}
		if a.Budget != "" {
			uses["budget "+a.Budget] = true
		}
	}
	if len(uses) == 0 {
		return
	}
	if ls, err := d.queue.Limits(ctx); err == nil {
		for _, l := range ls {
			if uses["limit "+l.Name] {
				s.Limits = append(s.Limits, api.LimitOf(l))
			}
		}
	}
	if bs, err := d.queue.Budgets(ctx); err == nil {
		for _, b := range bs {
			if uses["budget "+b.Name] {
				s.Budgets = append(s.Budgets, api.BudgetOf(b))
			}
		}
	}
}

// liveRun is what the supervisor knows of the run it holds for owner (this
// daemon), on the wire.
func liveRun(r supervisor.RunStatus, owner string, now time.Time) api.LiveRun {
	return api.LiveRunOf(lease.Run{
		ID: r.RunID, TaskID: r.TaskID, Lane: r.Lane, Agent: r.Agent, Attempt: r.Attempt, Owner: owner,
		State: lease.RunRunning, PID: r.PID, StartedAt: r.Started, LeaseExpiresAt: r.LeaseExpiresAt,
		LastOutputAt: r.LastOutputAt, CPUTime: r.CPU, SilentSeconds: r.SilentSeconds, LeaseLeft: r.LeaseLeft,
	}, now)
}

// Progress is POST /v1/runs/{id}/progress: a child proves progress through
// the socket (`qd heartbeat $QD_RUN_ID` inside an agent), which counts as
// output for the agent's stall_timeout. Children have no database URL, by
// design.
func (d *daemon) Progress(_ context.Context, runID int64) error {
	err := d.sup.Progress(runID)
	if errors.Is(err, supervisor.ErrUnknownRun) {
		return fmt.Errorf("run %d: %w", runID, api.ErrUnknownRun)
	}
	return err
}
