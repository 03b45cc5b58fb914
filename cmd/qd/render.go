package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/qd-run/qd/api"
)

// renderStatus writes the human form of s: a header, then tables of agents,
// runs in flight and lanes. now is the reader's clock, used only for the
// agents' next tick, which the daemon computed from the same host's clock.
func renderStatus(w io.Writer, s *api.Snapshot, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	renderHeader(tw, s, now)
	renderAgents(tw, s.Agents, now)
	renderBoxes(tw, s.Agents)
	renderPeriodics(tw, s.Periodics, now)
	renderRuns(tw, s.Runs, s.RunsTotal)
	renderLanes(tw, s.Lanes)
	renderSpending(tw, s, now)
	renderUnserved(tw, s.Unserved)
	return tw.Flush()
}

func renderHeader(w io.Writer, s *api.Snapshot, now time.Time) {
	fmt.Fprintf(w, "supervisor:\t%s\n", s.Supervisor)
	fmt.Fprintf(w, "version:\t%s\n", s.Version)
	fmt.Fprintf(w, "pid:\t%d\n", s.PID)
	fmt.Fprintf(w, "uptime:\t%s (since %s)\n", seconds(s.UptimeSeconds), s.StartedAt.Format(time.RFC3339))
	db := "reachable"
	if !s.Database.Reachable {
		db = "UNREACHABLE"
		if s.Database.Error != "" {
			db += ": " + s.Database.Error
		}
	}
	if at := s.Database.ServerChangedAt; !at.IsZero() {
		db += fmt.Sprintf("; SERVER CHANGED %s (%s): %s", at.Format(time.RFC3339), relative(at, now), s.Database.ServerChange)
		if held := s.Database.ClaimsHeldUntil; held.After(now) {
			db += ", claims wait until " + held.Format(time.RFC3339)
		}
	}
	fmt.Fprintf(w, "database:\t%s\n", db)
	if s.ConfigError != "" {
		fmt.Fprintf(w, "config:\tlast reload failed, old config in force: %s\n", s.ConfigError)
	}
	if sd := s.StateDir; sd.Path != "" {
		line := sd.Path
		if sd.WriteError != "" {
			line += fmt.Sprintf(" FAILING WRITES since %s: %s", sd.WriteErrorAt.Format(time.RFC3339), sd.WriteError)
		}
		if sd.IncompleteLogs > 0 {
			line += fmt.Sprintf(" (%d incomplete run logs)", sd.IncompleteLogs)
		}
		if sd.Lost != "" {
			line += " LOST: " + sd.Lost
		}
		fmt.Fprintf(w, "state dir:\t%s\n", line)
	}
	if c := s.Containment; c.Kind != "" {
		fmt.Fprintf(w, "contained:\t%s\n", containmentText(c))
	}
	if s.LogLinesDropped > 0 {
		fmt.Fprintf(w, "log:\t%s dropped: the daemon's stderr was not being read\n", count(s.LogLinesDropped, "line", "lines"))
	}
	if h := s.StartsHeld; h != nil {
		state := "HELD until " + h.Until.Format(time.RFC3339)
		if !h.Until.After(now) {
			state = "held until " + h.Until.Format(time.RFC3339) + ", trying again"
		}
		fmt.Fprintf(w, "starts:\t%s: %s; %s given back unstarted since %s\n", state, h.Reason, count(h.GivenBack, "run", "runs"), h.Since.Format(time.RFC3339))
	}
	for _, c := range s.StartCaps {
		fmt.Fprintf(w, "limits:\tstarts capped by %s (%d): about %d children, of the %d the agents' parallel asks for\n", c.Limit, c.Value, c.Children, c.Wanted)
	}
	if !s.DrainingSince.IsZero() {
		fmt.Fprintf(w, "state:\tDRAINING since %s (%s): claims nothing more\n", s.DrainingSince.Format(time.RFC3339), relative(s.DrainingSince, now))
	}
	if n := s.Notifications; n.Sent+n.Failed+n.Retried > 0 || len(n.Down) > 0 {
		fmt.Fprintf(w, "notified:\t%d sent, %d failed, %d retried\n", n.Sent, n.Failed, n.Retried)
		for _, down := range n.Down {
			fmt.Fprintf(w, "notify down:\t%s since %s (%s), %s failed: %s\n", down.Target,
				down.Since.Format(time.RFC3339), relative(down.Since, now), count(down.Fails, "try", "tries"), truncate(down.Error, 80))
		}
	}
}

func renderAgents(w io.Writer, agents []api.AgentStatus, now time.Time) {
	if !section(w, "AGENTS", len(agents), "NAME", "SCHEDULE", "NEXT TICK", "RUNNING", "LAST") {
		return
	}
	for _, a := range agents {
		last := "-"
		if l := a.Last; l != nil {
			last = fmt.Sprintf("%s %s (run %d)", l.Outcome, relative(l.At, now), l.RunID)
			if l.Summary != "" {
				last += ": " + truncate(l.Summary, 60)
			}
		}
		next := relative(a.NextTick, now)
		if p := a.Paused; p != nil {
			next = fmt.Sprintf("PAUSED %s by %s", relative(p.PausedAt, now), orDefault(p.SetBy, "someone unnamed"))
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\t%s\n", a.Name, a.Schedule, next, a.Running, a.Parallel, last)
	}
}

// renderBoxes lists what keeps each agent's runs in, for the agents that
// have a user, a fresh workdir or a sandbox.
func renderBoxes(w io.Writer, agents []api.AgentStatus) {
	var boxed []api.AgentStatus
	for _, a := range agents {
		if a.Box != nil {
			boxed = append(boxed, a)
		}
	}
	if len(boxed) == 0 {
		return
	}
	section(w, "BOXES", len(boxed), "AGENT", "IN FORCE")
	for _, a := range boxed {
		fmt.Fprintf(w, "%s\t%s\n", a.Name, a.Box.Text())
	}
}

func renderPeriodics(w io.Writer, ps []api.Periodic, now time.Time) {
	if len(ps) == 0 {
		return
	}
	section(w, "PERIODIC", len(ps), "NAME", "SCHEDULE", "AGENT", "LANE", "NEXT TICK", "LAST TICK")
	for _, p := range ps {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\n", p.Name, p.Schedule, p.Agent, p.Lane, relative(orZero(p.NextTick), now), relative(orZero(p.LastTick), now))
	}
}

// renderUnserved warns of queued tasks that no living daemon runs.
func renderUnserved(w io.Writer, us []api.UnservedAgent) {
	for _, u := range us {
		they := "they wait"
		if u.Queued == 1 {
			they = "it waits"
		}
		fmt.Fprintf(w, "\nWARNING: %s of agent %s, which no running daemon runs: %s until one does\n",
			count(u.Queued, "queued task", "queued tasks"), u.Agent, they)
	}
}

// renderRuns writes the runs listed, and how many of total it left out
// (qd status --runs N lists the oldest N).
func renderRuns(w io.Writer, runs []api.LiveRun, total int) {
	more := total - len(runs)
	if more > 0 && len(runs) == 0 {
		fmt.Fprintf(w, "\nRUNS IN FLIGHT\n%d in flight, none listed (qd status --runs N lists the oldest N)\n", total)
		return
	}
	if !section(w, "RUNS IN FLIGHT", len(runs), "RUN", "TASK", "LANE", "AGENT", "ATTEMPT", "PID", "AGE", "CPU", "SILENT", "OUTPUT QUIET", "LEASE LEFT") {
		return
	}
	for _, r := range runs {
		var cpu *time.Duration
		if r.CPUSeconds != nil {
			d := time.Duration(*r.CPUSeconds * float64(time.Second))
			cpu = &d
		}
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			r.RunID, r.TaskID, r.Lane, r.Agent, r.Attempt, pid(r.PID),
			seconds(r.AgeSeconds), cpuText(cpu), seconds(r.SilentSeconds), seconds(r.OutputSilentSeconds), leaseLeft(r.LeaseLeftSeconds))
	}
	if more > 0 {
		fmt.Fprintf(w, "… and %d more, younger (%d in flight; qd status --runs all lists every one)\n", more, total)
	}
}

func renderLanes(w io.Writer, lanes []api.LaneStatus) {
	if !section(w, "LANES", len(lanes), "NAME", "LIMIT", "PAUSED", "RUNNING", "QUEUED", "OLDEST") {
		return
	}
	for _, l := range lanes {
		oldest := "-"
		if l.Queued > 0 {
			oldest = seconds(l.OldestQueuedAgeSeconds)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%s\n", l.Name, l.MaxRunning, yesNo(l.Paused), l.Running, l.Queued, oldest)
	}
}

// renderSpending writes the limits and budgets the daemon's agents use,
// when they use any.
func renderSpending(w io.Writer, s *api.Snapshot, now time.Time) {
	if len(s.Limits) > 0 && section(w, "LIMITS", len(s.Limits), "NAME", "RATE", "BURST", "AVAILABLE", "NEXT UNIT", "AGENTS") {
		for _, l := range s.Limits {
			next := "-"
			if l.NextUnitAt != nil {
				next = relative(*l.NextUnitAt, now)
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\t%s\n", l.Name, l.Rate, l.Burst, l.Available, next, strings.Join(l.Agents, ","))
		}
	}
	if len(s.Budgets) > 0 && section(w, "BUDGETS", len(s.Budgets), "NAME", "SPENT", "PERIOD", "STATE") {
		for _, b := range s.Budgets {
			state := "open"
			if b.Exhausted {
				state = "spent; resumes " + b.PeriodEnd.In(zoneOf(b.Timezone)).Format("2006-01-02 15:04 MST")
			}
			fmt.Fprintf(w, "%s\t%s of %s\t%s %s\t%s\n", b.Name, money(b.Spent), money(b.Max), b.Period, b.Timezone, state)
		}
	}
}

// section writes a table's title after a blank line, then "(none)" when it
// has no rows, else its header; it reports whether rows follow.
func section(w io.Writer, title string, rows int, columns ...string) bool {
	fmt.Fprintf(w, "\n%s\n", title)
	if rows == 0 {
		fmt.Fprintf(w, "(none)\n")
		return false
	}
	fmt.Fprintln(w, strings.Join(columns, "\t"))
	return true
}

func pid(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func leaseLeft(s float64) string {
	if s <= 0 {
		return "expired"
	}
	return seconds(s)
}

func seconds(s float64) string {
	return duration(time.Duration(s * float64(time.Second)))
}

// containmentText is the header's line on how runs are contained.
func containmentText(c api.ContainmentStatus) string {
	if c.Kind != "cgroup" {
		return fmt.Sprintf("%s only (%s): a process that calls setsid outlives its run", c.Kind, c.Reason)
	}
	ctl := "no controllers"
	if len(c.Controllers) > 0 {
		ctl = "controllers " + strings.Join(c.Controllers, ", ")
	}
	line := fmt.Sprintf("cgroup per run under %s (%s)", c.Cgroup, ctl)
	if c.Reason != "" {
		line += "; " + c.Reason
	}
	return line
}
