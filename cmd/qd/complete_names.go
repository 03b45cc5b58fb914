package main

import (
	"context"
	"fmt"
	"sort"
	"time"
)

// The names completion offers as values: states, agents, lanes. Agents
// and lanes come from the config file and the database, as the command
// being completed would find them (--config, --db on the line).

// laneWait bounds how long completion waits for the database's lanes.
const laneWait = 2 * time.Second

// states are the values of --state for cmd.
func states(cmd *command) []candidate {
	var out []candidate
	switch cmd.name {
	case "tasks":
		for _, s := range taskStates {
			out = append(out, candidate{word: string(s)})
		}
	case "runs":
		for _, s := range runStates {
			out = append(out, candidate{word: string(s)})
		}
	}
	return out
}

// agents are the agents of the config, with their schedules.
func (c *completer) agents() []candidate {
	conf, err := c.env.Config()
	if err != nil {
		return nil
	}
	var out []candidate
	for _, a := range conf.Agents {
		out = append(out, candidate{a.Name, "agent, wakes " + a.Schedule})
	}
	return out
}

// lanes are the lanes the config names (lane blocks, agents' lanes,
// periodic blocks' lanes) and, when the database answers within laneWait,
// those it holds, with their queues.
func (c *completer) lanes() []candidate {
	found := map[string]string{}
	if conf, err := c.env.Config(); err == nil {
		for _, l := range conf.Lanes {
			found[l.Name] = "lane in the config"
		}
		for _, a := range conf.Agents {
			for _, l := range a.Lanes {
				found[l] = "lane in the config"
			}
		}
		for _, p := range conf.Periodics {
			found[p.Lane] = "lane in the config"
		}
	}
	for name, desc := range c.databaseLanes() {
		found[name] = desc
	}
	out := make([]candidate, 0, len(found))
	for name, desc := range found {
		out = append(out, candidate{name, desc})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].word < out[j].word })
	return out
}

// databaseLanes returns the database's lanes with their queues, or none
// when it does not answer within laneWait.
func (c *completer) databaseLanes() map[string]string {
	ctx, cancel := context.WithTimeout(c.ctx, laneWait)
	defer cancel()
	prov, err := c.env.Provider(ctx)
	if err != nil {
		return nil
	}
	lanes, err := prov.Lanes(ctx)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for _, l := range lanes {
		desc := fmt.Sprintf("lane, %d queued, %d running", l.Queued, l.Running)
		if l.Paused {
			desc += ", paused"
		}
		out[l.Name] = desc
	}
	return out
}
