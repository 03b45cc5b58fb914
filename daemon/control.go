package daemon

import (
	"context"
	"fmt"
	"strings"

	"github.com/qd-run/qd/api"
)

// peer names, for the log, the process behind a request on the socket: its
// pid and, when it belongs to a child's process group, the run.
func (d *daemon) peer(ctx context.Context) []any {
	pid := api.PeerPID(ctx)
	if run := d.sup.RunOfProcess(pid); run != 0 {
		return []any{"peer_pid", pid, "peer_run", run}
	}
	return []any{"peer_pid", pid}
}

// CancelTask is POST /v1/tasks/{id}/cancel: `qd cancel` on this host has
// marked the task, and the daemon stops its run now instead of at the
// run's next heartbeat.
func (d *daemon) CancelTask(ctx context.Context, taskID int64) (int64, error) {
	run := d.sup.CancelTask(taskID)
	d.logger.Info("cancel through the socket", append([]any{"task_id", taskID, "run_id", run}, d.peer(ctx)...)...)
	return run, nil
}

// Wake is POST /v1/agents/{name}/wake: a task was just enqueued for agent
// on this host, and the daemon claims for it now instead of at its tick.
func (d *daemon) Wake(ctx context.Context, agent string) error {
	if !d.sched.Wake(agent) {
		return fmt.Errorf("agent %q: %w; it runs: %s", agent, api.ErrUnknownAgent, d.agentList())
	}
	d.logger.Info("wake through the socket", append([]any{"agent", agent}, d.peer(ctx)...)...)
	return nil
}

// agentList names the agents of the config in force.
func (d *daemon) agentList() string {
	conf := d.config()
	if len(conf.Agents) == 0 {
		return "no agents"
	}
	names := make([]string, len(conf.Agents))
	for i, a := range conf.Agents {
		names[i] = a.Name
	}
	return strings.Join(names, ", ")
}
