package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/qd-run/qd/internal/status"
	"github.com/qd-run/qd/supervisor"
)

// version is set at build time with -ldflags "-X main.version=..."; when it
// is not, Version falls back to the module version `go install` records.
var version = ""

// Version returns qd's version: the linked-in one, else the module's, else
// "devel" with the VCS revision when the build recorded one.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}

// snapshot builds what the status socket serves. It reads the supervisor's
// copied state and asks the database for lane depths with a short timeout,
// so a slow database or client never holds up the heartbeat loop.
func (d *daemon) snapshot(ctx context.Context) status.Snapshot {
	conf := d.config()
	now := time.Now()
	s := status.Snapshot{
		Supervisor: conf.Name, Version: Version(), PID: os.Getpid(),
		StartedAt: d.started, UptimeSeconds: now.Sub(d.started).Seconds(),
	}
	d.mu.Lock()
	s.ConfigError = d.reloadErr
	d.mu.Unlock()
	s.LogLinesDropped = d.logOut.Dropped()
	h := d.sup.StateDirHealth()
	s.StateDir = status.StateDirStatus{Path: conf.StateDir, WriteError: h.WriteError, WriteErrorAt: h.At, IncompleteLogs: h.IncompleteLogs}
	next := d.sched.NextTicks()
	for _, a := range conf.Agents {
		s.Agents = append(s.Agents, status.AgentStatus{
			Name: a.Name, Schedule: a.Schedule, NextTick: next[a.Name],
			Running: d.sup.Running(a.Name), Parallel: a.Parallel,
		})
	}
	for _, r := range d.sup.Snapshot() {
		s.Runs = append(s.Runs, runStatus(r, now))
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	lanes, err := d.queue.Lanes(ctx)
	d.setDBError(err)
	s.Database.Reachable = err == nil
	if err != nil {
		s.Database.Error = err.Error()
	}
	for _, l := range lanes {
		ls := status.LaneStatus{Name: l.Name, MaxRunning: l.MaxRunning, Paused: l.Paused, Running: l.Running, Queued: l.Queued}
		if !l.OldestQueued.IsZero() {
			ls.OldestQueuedAgeSeconds = now.Sub(l.OldestQueued).Seconds()
		}
		s.Lanes = append(s.Lanes, ls)
	}
	return s
}

func runStatus(r supervisor.RunStatus, now time.Time) status.RunStatus {
	quiet := r.Started
	if !r.LastOutputAt.IsZero() {
		quiet = r.LastOutputAt
	}
	return status.RunStatus{
		RunID: r.RunID, TaskID: r.TaskID, Lane: r.Lane, Agent: r.Agent, Attempt: r.Attempt,
		PID: r.PID, StartedAt: r.Started, AgeSeconds: now.Sub(r.Started).Seconds(),
		SilentSeconds: r.SilentSeconds, LastOutputAt: r.LastOutputAt,
		OutputSilentSeconds: now.Sub(quiet).Seconds(),
		LeaseExpiresAt:      r.LeaseExpiresAt, LeaseLeftSeconds: r.LeaseLeft.Seconds(),
	}
}

// handleProgress lets a child prove progress through the socket
// (`qd heartbeat $QD_RUN_ID` inside an agent): it counts as output for the
// agent's stall_timeout. Children have no database URL, by design.
func (d *daemon) handleProgress(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, "run id must be a positive integer", http.StatusBadRequest)
		return
	}
	if err := d.sup.Progress(id); err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, supervisor.ErrUnknownRun) {
			code = http.StatusNotFound
		}
		http.Error(w, err.Error(), code)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
