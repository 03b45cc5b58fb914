package status

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"
)

// Render writes the human form of s: a header, then tables of agents,
// runs in flight and lanes. now is the reader's clock, used only for the
// agents' next tick, which the daemon computed from the same host's clock.
func Render(w io.Writer, s *Snapshot, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	renderHeader(tw, s)
	renderAgents(tw, s.Agents, now)
	renderRuns(tw, s.Runs)
	renderLanes(tw, s.Lanes)
	return tw.Flush()
}

func renderHeader(w io.Writer, s *Snapshot) {
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
		fmt.Fprintf(w, "state dir:\t%s\n", line)
	}
	if s.LogLinesDropped > 0 {
		fmt.Fprintf(w, "log:\t%d lines dropped: the daemon's stderr was not being read\n", s.LogLinesDropped)
	}
}

func renderAgents(w io.Writer, agents []AgentStatus, now time.Time) {
	fmt.Fprintf(w, "\nAGENTS\n")
	if len(agents) == 0 {
		fmt.Fprintf(w, "(none)\n")
		return
	}
	fmt.Fprintf(w, "NAME\tSCHEDULE\tNEXT TICK\tRUNNING\n")
	for _, a := range agents {
		fmt.Fprintf(w, "%s\t%s\t%s\t%d/%d\n", a.Name, a.Schedule, relative(a.NextTick, now), a.Running, a.Parallel)
	}
}

func renderRuns(w io.Writer, runs []RunStatus) {
	fmt.Fprintf(w, "\nRUNS IN FLIGHT\n")
	if len(runs) == 0 {
		fmt.Fprintf(w, "(none)\n")
		return
	}
	fmt.Fprintf(w, "RUN\tTASK\tLANE\tAGENT\tATTEMPT\tPID\tAGE\tSILENT\tOUTPUT QUIET\tLEASE LEFT\n")
	for _, r := range runs {
		fmt.Fprintf(w, "%d\t%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n",
			r.RunID, r.TaskID, r.Lane, r.Agent, r.Attempt, pid(r.PID),
			seconds(r.AgeSeconds), seconds(r.SilentSeconds), seconds(r.OutputSilentSeconds), leaseLeft(r.LeaseLeftSeconds))
	}
}

func renderLanes(w io.Writer, lanes []LaneStatus) {
	fmt.Fprintf(w, "\nLANES\n")
	if len(lanes) == 0 {
		fmt.Fprintf(w, "(none)\n")
		return
	}
	fmt.Fprintf(w, "NAME\tLIMIT\tPAUSED\tRUNNING\tQUEUED\tOLDEST\n")
	for _, l := range lanes {
		oldest := "-"
		if l.Queued > 0 {
			oldest = seconds(l.OldestQueuedAgeSeconds)
		}
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%d\t%s\n", l.Name, l.MaxRunning, yesNo(l.Paused), l.Running, l.Queued, oldest)
	}
}

func pid(p int) string {
	if p == 0 {
		return "-"
	}
	return strconv.Itoa(p)
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

// relative says when t is from now: "in 12s", "3m ago", "now", or "-" for
// the zero time.
func relative(t, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := t.Sub(now)
	switch {
	case d > -time.Second && d < time.Second:
		return "now"
	case d > 0:
		return "in " + Duration(d)
	}
	return Duration(-d) + " ago"
}

func seconds(s float64) string {
	return Duration(time.Duration(s * float64(time.Second)))
}

// Duration formats d with its two largest units, rounded down: "45s",
// "3m4s", "1h2m", "2d3h". A zero second part is left out ("3m").
func Duration(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	secs := int64(d / time.Second)
	const minute, hour, day = 60, 3600, 86400
	switch {
	case secs < minute:
		return fmt.Sprintf("%ds", secs)
	case secs < hour:
		return pair(secs/minute, "m", secs%minute, "s")
	case secs < day:
		return pair(secs/hour, "h", secs%hour/minute, "m")
	}
	return pair(secs/day, "d", secs%day/hour, "h")
}

func pair(a int64, au string, b int64, bu string) string {
	if b == 0 {
		return fmt.Sprintf("%d%s", a, au)
	}
	return fmt.Sprintf("%d%s%d%s", a, au, b, bu)
}
