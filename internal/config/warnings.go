package config

import (
	"fmt"
	"time"
)

// warnings finds what is valid but likely not what the author meant: an
// agent that can never run as many children as its parallel allows, a
// periodic schedule that enqueues faster than its agent wakes, and a
// periodic whose agent no block here defines (its tasks wait for a daemon
// elsewhere that runs it). qd run --check prints them; the daemon logs
// them at start and on reload.
func warnings(c *Config) []Problem {
	var out []Problem
	warn := func(line int, format string, args ...any) {
		out = append(out, Problem{File: c.Path, Line: line, Message: fmt.Sprintf(format, args...)})
	}
	for i := range c.Agents {
		a := &c.Agents[i]
		if len(a.Lanes) == 0 {
			continue
		}
		total := 0
		for _, name := range a.Lanes {
			limit := 1
			if l := c.Lane(name); l != nil && l.MaxRunning != nil {
				limit = *l.MaxRunning
			}
			total += limit
		}
		if a.Parallel > total {
			warn(a.DeclRange.Start.Line, "agent %q: parallel = %d, but its lanes %v allow %d runs at once (a lane without a lane block, or max_running, counts as 1 unless `qd lane set` raised it)",
				a.Name, a.Parallel, a.Lanes, total)
		}
	}
	now := time.Now()
	for i := range c.Periodics {
		p := &c.Periodics[i]
		a := c.Agent(p.Agent)
		if a == nil {
			warn(p.DeclRange.Start.Line, "periodic %q: agent %q is not defined in this file; its tasks wait until a daemon that runs it claims them",
				p.Name, p.Agent)
			continue
		}
		if pt, at := ticksPerDay(p.Sched, now), ticksPerDay(a.Sched, now); pt > at*a.Parallel {
			warn(p.DeclRange.Start.Line, "periodic %q enqueues about %d tasks a day, but agent %q wakes %d times a day with parallel = %d: tasks pile up when each run lasts its whole interval",
				p.Name, pt, a.Name, at, a.Parallel)
		}
	}
	return out
}

// ticksPerDay counts a schedule's ticks in the day after now, up to a
// bound.
func ticksPerDay(s interface{ Next(time.Time) time.Time }, now time.Time) int {
	const most = 100000
	end := now.Add(24 * time.Hour)
	n := 0
	for t := s.Next(now); !t.IsZero() && t.Before(end) && n < most; t = s.Next(t) {
		n++
	}
	return n
}
