package memlease

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/qd-run/qd/lease"
)

// Task returns one task.
func (p *Provider) Task(ctx context.Context, id int64) (lease.Task, error) {
	if _, err := p.lock(ctx); err != nil {
		return lease.Task{}, fmt.Errorf("get task %d: %w", id, err)
	}
	defer p.mu.Unlock()
	t := p.tasks[id]
	if t == nil {
		return lease.Task{}, fmt.Errorf("get task %d: %w", id, lease.ErrNotFound)
	}
	v := p.taskView(t)
	if v.State == lease.TaskDone {
		v.Result = p.result(id)
	}
	return v, nil
}

// Run returns one run.
func (p *Provider) Run(ctx context.Context, id int64) (lease.Run, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return lease.Run{}, fmt.Errorf("get run %d: %w", id, err)
	}
	defer p.mu.Unlock()
	r := p.runs[id]
	if r == nil {
		return lease.Run{}, fmt.Errorf("get run %d: %w", id, lease.ErrNotFound)
	}
	return p.runView(r, now), nil
}

// Tasks lists tasks by id.
func (p *Provider) Tasks(ctx context.Context, f lease.TaskFilter) ([]lease.Task, error) {
	if _, err := p.lock(ctx); err != nil {
		return nil, fmt.Errorf("list tasks: %w", err)
	}
	defer p.mu.Unlock()
	out := []lease.Task{}
	for _, t := range p.tasks {
		if (f.Lane == "" || t.Lane == f.Lane) && (f.Agent == "" || t.Agent == f.Agent) &&
			(f.State == "" || t.State == f.State) {
			out = append(out, p.taskView(t))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return limit(out, f.Limit), nil
}

// Runs lists runs newest first, or in attempt order for one task.
func (p *Provider) Runs(ctx context.Context, f lease.RunFilter) ([]lease.Run, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer p.mu.Unlock()
	out := []lease.Run{}
	for _, r := range p.runs {
		if (f.TaskID == 0 || r.TaskID == f.TaskID) && (f.Lane == "" || r.Lane == f.Lane) &&
			(f.State == "" || r.State == f.State) && (f.Owner == "" || r.Owner == f.Owner) &&
			(f.Agent == "" || r.Agent == f.Agent) && r.StartedAt.After(f.StartedAfter) && r.ID > f.AfterID {
			out = append(out, p.runView(r, now))
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if f.TaskID != 0 && out[i].Attempt != out[j].Attempt {
			return out[i].Attempt < out[j].Attempt
		}
		if f.TaskID != 0 {
			return out[i].ID < out[j].ID
		}
		return out[i].ID > out[j].ID
	})
	return limit(out, f.Limit), nil
}

func limit[T any](s []T, n int) []T {
	if n > 0 && len(s) > n {
		return s[:n]
	}
	return s
}

func (p *Provider) taskView(t *lease.Task) lease.Task {
	v := *t
	v.Payload = bytes.Clone(t.Payload)
	var last int64
	for id, r := range p.runs {
		if r.TaskID == t.ID && id > last {
			last, v.LastSummary = id, r.Summary
		}
	}
	if why, ok := p.chain.summary[t.ID]; ok {
		v.LastSummary = why
	}
	v.After = slices.Clone(t.After)
	return v
}

// runView copies r and fills the fields computed at read time.
func (p *Provider) runView(r *lease.Run, now time.Time) lease.Run {
	v := *r
	if r.ExitCode != nil {
		code := *r.ExitCode
		v.ExitCode = &code
	}
	if r.CPUTime != nil {
		cpu := *r.CPUTime
		v.CPUTime = &cpu
	}
	if r.MemoryPeak != nil {
		peak := *r.MemoryPeak
		v.MemoryPeak = &peak
	}
	if r.State == lease.RunRunning {
		v.CancelRequested = p.tasks[r.TaskID].CancelRequested
		v.SilentSeconds = now.Sub(r.LastHeartbeatAt).Seconds()
		v.LeaseLeft = max(r.LeaseExpiresAt.Sub(now), 0)
	}
	return v
}

// Prune deletes finished tasks, and their runs, that finished more than
// olderThan ago.
func (p *Provider) Prune(ctx context.Context, olderThan time.Duration, dryRun bool) (lease.PruneResult, error) {
	if olderThan < 0 {
		return lease.PruneResult{}, fmt.Errorf("prune: %w: age %s is negative", lease.ErrInvalid, olderThan)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return lease.PruneResult{}, fmt.Errorf("prune: %w", err)
	}
	defer p.mu.Unlock()
	cutoff := now.Add(-olderThan)
	var res lease.PruneResult
	gone := map[int64]bool{}
	for id, t := range p.tasks {
		if t.State.Finished() && t.FinishedAt.Before(cutoff) && !p.awaited(id) {
			gone[id] = true
		}
	}
	for id, r := range p.runs {
		if gone[r.TaskID] {
			res.RunIDs = append(res.RunIDs, id)
		}
	}
	sort.Slice(res.RunIDs, func(i, j int) bool { return res.RunIDs[i] < res.RunIDs[j] })
	res.Tasks, res.Runs = int64(len(gone)), int64(len(res.RunIDs))
	if dryRun {
		return res, nil
	}
	for id := range gone {
		delete(p.tasks, id)
	}
	for _, id := range res.RunIDs {
		delete(p.runs, id)
	}
	p.forget(gone)
	return res, nil
}

// PeriodicTick records tick for name and enqueues ep, once per tick.
func (p *Provider) PeriodicTick(ctx context.Context, name string, tick time.Time, ep lease.EnqueueParams) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("record periodic tick: %w: empty schedule name", lease.ErrInvalid)
	}
	if err := lease.ValidateEnqueue(&ep); err != nil {
		return false, fmt.Errorf("record periodic tick %s: %w", name, err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return false, fmt.Errorf("record periodic tick %s: %w", name, err)
	}
	defer p.mu.Unlock()
	if last, ok := p.periodic[name]; ok && !tick.After(last) {
		return false, nil
	}
	p.periodic[name] = tick
	p.enqueue(ep, now)
	return true, nil
}

// PeriodicLast returns the last recorded tick of name, zero if none.
func (p *Provider) PeriodicLast(ctx context.Context, name string) (time.Time, error) {
	if _, err := p.lock(ctx); err != nil {
		return time.Time{}, fmt.Errorf("read periodic tick %s: %w", name, err)
	}
	defer p.mu.Unlock()
	return p.periodic[name], nil
}
