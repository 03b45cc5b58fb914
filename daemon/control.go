package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

// peer names, for the log, who sent a request on the socket: its pid and,
// for a run, the run and how it was proved (api.CallerOf).
func peer(ctx context.Context) []any {
	c := api.CallerOf(ctx)
	if c.Operator() {
		return []any{"peer_pid", c.PID}
	}
	return []any{"peer_pid", c.PID, "peer_run", c.RunID, "proved_by", c.By}
}

// RunOfToken is the live run whose child holds token (QD_RUN_TOKEN).
func (d *daemon) RunOfToken(token string) api.RunRef {
	r := d.sup.RunOfToken(token)
	return api.RunRef{RunID: r.RunID, TaskID: r.TaskID}
}

// RunOfPeer is the live run whose process group or cgroup holds pid.
func (d *daemon) RunOfPeer(pid int) (api.RunRef, error) {
	r, err := d.sup.RunOfProcess(pid)
	return api.RunRef{RunID: r.RunID, TaskID: r.TaskID}, err
}

// TaskParent is the run that enqueued task id, for the rule that lets a
// run cancel the tasks it enqueued.
func (d *daemon) TaskParent(ctx context.Context, taskID int64) (int64, error) {
	t, err := d.queue.Task(ctx, taskID)
	if errors.Is(err, lease.ErrNotFound) {
		return 0, fmt.Errorf("task %d: %w", taskID, api.ErrUnknownTask)
	}
	if err != nil {
		return 0, fmt.Errorf("look up task %d: %w", taskID, err)
	}
	return t.ParentRun, nil
}

// CancelTask is POST /v1/tasks/{id}/cancel: the cancel is recorded in the
// database first, as `qd cancel` does (a queued task is cancelled there
// and then), and the daemon stops the task's run now if it runs it,
// instead of at the run's next poll. A run stopped so settles as
// cancelled, which only a recorded request may cause.
func (d *daemon) CancelTask(ctx context.Context, taskID int64) (api.Cancelled, error) {
	state, err := d.queue.Cancel(ctx, taskID)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return api.Cancelled{}, fmt.Errorf("task %d: %w", taskID, api.ErrUnknownTask)
	case errors.Is(err, lease.ErrConflict):
		return api.Cancelled{}, fmt.Errorf("%w: task %d is already %s", api.ErrConflict, taskID, state)
	case err != nil:
		return api.Cancelled{}, err
	}
	res := api.Cancelled{TaskID: taskID, State: string(state)}
	if state == lease.TaskRunning {
		res.RunID = d.sup.CancelTask(taskID)
	}
	d.logger.Info("cancel through the socket", append([]any{"task_id", taskID, "state", state, "run_id", res.RunID}, peer(ctx)...)...)
	return res, nil
}

// Wake is POST /v1/agents/{name}/wake: a task was just enqueued for agent
// on this host, and the daemon claims for it now instead of at its tick.
func (d *daemon) Wake(ctx context.Context, agent string) error {
	if !d.sched.Wake(agent) {
		return fmt.Errorf("agent %q: %w; it runs: %s", agent, api.ErrUnknownAgent, d.agentList())
	}
	d.logger.Info("wake through the socket", append([]any{"agent", agent}, peer(ctx)...)...)
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
// a follow-up an agent enqueues (it has no database URL). The run that
// sent it (api.CallerOf) is recorded as the task's parent.
func (d *daemon) Enqueue(ctx context.Context, req api.EnqueueRequest) (api.Enqueued, error) {
	p := lease.EnqueueParams{Lane: req.Lane, Agent: req.Agent, Payload: req.Payload, Priority: req.Priority,
		RunAfter: req.RunAfter, Delay: time.Duration(req.DelaySeconds * float64(time.Second)),
		MaxAttempts: req.MaxAttempts, DedupeKey: req.DedupeKey, ParentRun: api.CallerOf(ctx).RunID,
		After: req.After, AfterAny: req.AfterAny}
	if err := lease.ValidateEnqueue(&p); err != nil {
		return api.Enqueued{}, fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	}
	if err := d.mayWaitFor(ctx, p.After); err != nil {
		return api.Enqueued{}, err
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
		"existed", existed, "woken", res.Woken}, peer(ctx)...)...)
	return res, nil
}

// SetResult is POST /v1/runs/{id}/result: the run's result, kept by its
// supervisor until the run completes and stored with the completion.
func (d *daemon) SetResult(ctx context.Context, runID int64, result []byte) error {
	err := d.sup.SetResult(runID, result)
	switch {
	case errors.Is(err, lease.ErrInvalid):
		return fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	case errors.Is(err, supervisor.ErrUnknownRun):
		return fmt.Errorf("run %d: %w", runID, api.ErrUnknownRun)
	case err != nil:
		return err
	}
	d.logger.Debug("result through the socket", append([]any{"run_id", runID, "bytes", len(result)}, peer(ctx)...)...)
	return nil
}

// ParentResults is GET /v1/runs/{id}/parents: the results of the tasks the
// run's task waited for, read from the queue.
func (d *daemon) ParentResults(ctx context.Context, runID int64) (map[int64]json.RawMessage, error) {
	taskID := d.sup.TaskOf(runID)
	if taskID == 0 {
		return nil, fmt.Errorf("run %d: %w", runID, api.ErrUnknownRun)
	}
	return d.queue.ParentResults(ctx, taskID)
}

// mayWaitFor refuses a run's enqueue after a task that is neither the
// run's own nor one it enqueued: a run acts only on those, and the task
// it enqueues would read the results of the tasks it waits for. An id
// that names no task is left to the queue, which refuses it.
func (d *daemon) mayWaitFor(ctx context.Context, after []int64) error {
	c := api.CallerOf(ctx)
	if c.Operator() {
		return nil
	}
	for _, id := range after {
		if id == c.TaskID {
			continue
		}
		t, err := d.queue.Task(ctx, id)
		switch {
		case errors.Is(err, lease.ErrNotFound):
			continue
		case err != nil:
			return fmt.Errorf("look up task %d: %w", id, err)
		case t.ParentRun != c.RunID:
			return fmt.Errorf("%w: run %d may make a task wait only for its own task (%d) and the tasks it enqueued; task %d is neither",
				api.ErrRefused, c.RunID, c.TaskID, id)
		}
	}
	return nil
}

// Spend is POST /v1/limits/{name}/spend: the caller's run spent units of
// a limit after its claim's unit (tokens, say), taken from the limit at
// once for every daemon.
func (d *daemon) Spend(ctx context.Context, name string, units int64) (api.Limit, error) {
	if err := lease.CheckSpend(name, units); err != nil {
		return api.Limit{}, fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	}
	l, err := d.queue.Spend(ctx, name, units)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return api.Limit{}, fmt.Errorf("%w: limit %q is not declared: no limit block or `qd limit set` made it", api.ErrUnknownLimit, name)
	case err != nil:
		return api.Limit{}, err
	}
	d.logger.Debug("spend through the socket", append([]any{"limit", name, "units", units, "available", l.Available},
		peer(ctx)...)...)
	return api.LimitOf(l), nil
}

// Defer is POST /v1/runs/{id}/defer: the child of the run was told "try
// later" and will exit 75; its task waits d rather than retry_backoff.
func (d *daemon) Defer(ctx context.Context, runID int64, delay time.Duration) error {
	err := d.sup.Defer(runID, delay)
	if errors.Is(err, supervisor.ErrUnknownRun) {
		return fmt.Errorf("run %d: %w", runID, api.ErrUnknownRun)
	}
	if err == nil {
		d.logger.Debug("deferral asked through the socket", append([]any{"run_id", runID, "delay", delay}, peer(ctx)...)...)
	}
	return err
}

// Usage is POST /v1/runs/{id}/usage: the run spent req.Amount, added to
// the run and, when its agent has a budget, to the budget's period.
func (d *daemon) Usage(ctx context.Context, runID int64, req api.UsageRequest) (api.UsageReported, error) {
	if err := lease.CheckUsage(req.Amount); err != nil {
		return api.UsageReported{}, fmt.Errorf("%w: %v", api.ErrBadRequest, err)
	}
	agent, err := d.sup.AgentOf(runID)
	if err != nil {
		return api.UsageReported{}, fmt.Errorf("run %d: %w", runID, api.ErrUnknownRun)
	}
	u := lease.Usage{RunID: runID, Amount: req.Amount, Note: req.Note}
	if a := d.config().Agent(agent); a != nil {
		u.Budget = a.Budget
	}
	b, err := d.queue.RecordUsage(ctx, u)
	if err != nil {
		return api.UsageReported{}, err
	}
	res := api.UsageReported{RunID: runID}
	if u.Budget != "" {
		wire := api.BudgetOf(b)
		res.Budget = &wire
	}
	d.logger.Debug("usage reported through the socket", append([]any{"run_id", runID, "amount", req.Amount,
		"budget", u.Budget}, peer(ctx)...)...)
	return res, nil
}
