package daemon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
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
	if names := agentNames(d.config()); len(names) > 0 {
		return strings.Join(names, ", ")
	}
	return "no agents"
}

// Enqueue is POST /v1/tasks: a task added to this daemon's queue, usually
// a follow-up an agent enqueues (it has no database URL). The run whose
// process group sent it is recorded as the task's parent.
func (d *daemon) Enqueue(ctx context.Context, req api.EnqueueRequest) (api.Enqueued, error) {
	pid := api.PeerPID(ctx)
	p := lease.EnqueueParams{Lane: req.Lane, Agent: req.Agent, Payload: req.Payload, Priority: req.Priority,
		RunAfter: req.RunAfter, Delay: time.Duration(req.DelaySeconds * float64(time.Second)),
		MaxAttempts: req.MaxAttempts, DedupeKey: req.DedupeKey, ParentRun: d.sup.RunOfProcess(pid)}
	if err := lease.ValidateEnqueue(&p); err != nil {
		return api.Enqueued{}, fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	}
	id, existed, err := d.queue.Enqueue(ctx, p)
	if err != nil {
		if errors.Is(err, lease.ErrInvalid) {
			return api.Enqueued{}, fmt.Errorf("%w: %v", api.ErrBadRequest, err)
		}
		return api.Enqueued{}, err
	}
	res := api.Enqueued{TaskID: id, Existed: existed, ParentRun: p.ParentRun}
	due := p.RunAfter.IsZero() && p.Delay == 0
	if req.Wake && !existed && due {
		res.Woken = d.sched.Wake(p.Agent)
	}
	d.logger.Info("enqueue through the socket", append([]any{"task_id", id, "lane", p.Lane, "agent", p.Agent,
		"existed", existed, "woken", res.Woken}, d.peer(ctx)...)...)
	return res, nil
}
