package memlease

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/qd-run/qd/lease"
)

// liveRun returns the run id if it is live at now. It returns
// lease.ErrNotFound for an unknown id and lease.ErrLeaseLost otherwise.
func (p *Provider) liveRun(id int64, now time.Time) (*lease.Run, error) {
	r := p.runs[id]
	if r == nil {
		return nil, fmt.Errorf("run %d: %w", id, lease.ErrNotFound)
	}
	if r.State != lease.RunRunning || !now.Before(r.LeaseExpiresAt) {
		return r, fmt.Errorf("run %d: %w", id, lease.ErrLeaseLost)
	}
	return r, nil
}

// Heartbeat extends the leases of live runs; each result carries its own
// error.
func (p *Provider) Heartbeat(ctx context.Context, beats ...lease.Beat) ([]lease.BeatResult, error) {
	for _, b := range beats {
		if b.Lease < 0 {
			return nil, fmt.Errorf("heartbeat run %d: %w: lease %s is negative", b.RunID, lease.ErrInvalid, b.Lease)
		}
	}
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	defer p.mu.Unlock()
	out := make([]lease.BeatResult, len(beats))
	for i, b := range beats {
		out[i] = p.beat(b, now)
	}
	return out, nil
}

func (p *Provider) beat(b lease.Beat, now time.Time) lease.BeatResult {
	res := lease.BeatResult{RunID: b.RunID}
	r, err := p.liveRun(b.RunID, now)
	if err != nil {
		res.Err = fmt.Errorf("heartbeat %w", err)
		return res
	}
	d := b.Lease
	if d == 0 {
		d = lease.DefaultLease
	}
	r.LastHeartbeatAt = now
	r.LeaseExpiresAt = now.Add(d)
	if b.PID != 0 {
		r.PID = b.PID
	}
	if !b.LastOutputAt.IsZero() {
		r.LastOutputAt = b.LastOutputAt
	}
	res.LeaseExpiresAt = r.LeaseExpiresAt
	res.CancelRequested = p.tasks[r.TaskID].CancelRequested
	return res
}

// Settle ends runs, each fenced on its own. Settling a run again with the
// outcome it already has succeeds and changes nothing.
func (p *Provider) Settle(ctx context.Context, ss ...lease.Settlement) ([]error, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("settle runs: %w", err)
	}
	defer p.mu.Unlock()
	out := make([]error, len(ss))
	for i, s := range ss {
		out[i] = p.settle(s, now)
	}
	return out, nil
}

func (p *Provider) settle(s lease.Settlement, now time.Time) error {
	if err := lease.ValidateSettlement(s); err != nil {
		return fmt.Errorf("settle run: %w", err)
	}
	r, err := p.liveRun(s.RunID, now)
	if r != nil && err != nil && r.State == s.Outcome {
		if s.Event != "" {
			p.record(r, s.Event, now)
		}
		return nil
	}
	if err != nil && p.lateCompletion(r, s) {
		p.end(r, s, now) // a reaped run's task was queued or failed: done now
		p.revive(r.TaskID, now)
		return nil
	}
	if err != nil {
		return fmt.Errorf("settle %w", err)
	}
	s = p.deferral(r, s)
	p.end(r, s, now)
	if s.Event != "" {
		p.record(r, s.Event, now)
	}
	return nil
}

// deferral counts a deferral of live run r's task, or, when the task has
// had s.MaxDeferrals already, turns s into the failure of the run.
func (p *Provider) deferral(r *lease.Run, s lease.Settlement) lease.Settlement {
	if !s.Deferred {
		return s
	}
	t := p.tasks[r.TaskID]
	if t.Deferrals >= s.MaxDeferrals {
		s.Outcome, s.Refund, s.RetryIn, s.Deferred = lease.RunFailed, false, 0, false
		s.Summary += lease.DeferralCapped(s.MaxDeferrals)
		return s
	}
	t.Deferrals++
	r.Deferred = true
	return s
}

// lateCompletion reports whether s, for run r no longer live, is a
// completion taken late: no run of the task was claimed after r, and r is
// still marked running (its lease ran out) or was reaped (abandoned, its
// task queued again or failed for good).
func (p *Provider) lateCompletion(r *lease.Run, s lease.Settlement) bool {
	if r == nil || s.Outcome != lease.RunCompleted {
		return false
	}
	t := p.tasks[r.TaskID]
	switch {
	case r.State == lease.RunRunning:
	case r.State == lease.RunAbandoned && !r.FinishedAt.Before(r.LeaseExpiresAt) &&
		(t.State == lease.TaskQueued || t.State == lease.TaskFailed):
		// Abandoned once its lease ran out (reaped), not given up by its
		// owner while it held it.
	default:
		return false
	}
	for _, o := range p.runs {
		if o.TaskID == r.TaskID && o.ID > r.ID {
			return false
		}
	}
	return true
}

// end records the outcome of run r, live or completed late, and decides
// what becomes of its task: done, cancelled, failed when out of attempts,
// or queued again.
func (p *Provider) end(r *lease.Run, s lease.Settlement, now time.Time) {
	r.State = s.Outcome
	r.FinishedAt = now
	r.Summary = s.Summary
	if s.ExitCode != nil {
		code := *s.ExitCode
		r.ExitCode = &code
	}
	r.Signal = s.Signal
	r.OutputTail = s.OutputTail
	r.LogError = s.LogError
	r.CPUTime, r.MemoryPeak = nil, nil
	if s.CPUTime != nil {
		cpu := *s.CPUTime
		r.CPUTime = &cpu
	}
	if s.MemoryPeak != nil {
		peak := *s.MemoryPeak
		r.MemoryPeak = &peak
	}
	delete(p.live, r.ID)
	if s.Outcome == lease.RunCompleted && s.Result != nil {
		p.chain.results[r.ID] = bytes.Clone(s.Result)
	}

	t := p.tasks[r.TaskID]
	defer func() {
		if t.State.Finished() {
			p.release(t.ID, now)
		}
	}()
	switch {
	case s.Outcome == lease.RunCompleted:
		finish(t, lease.TaskDone, now)
	case s.Outcome == lease.RunCancelled || t.CancelRequested:
		finish(t, lease.TaskCancelled, now)
	case s.Outcome == lease.RunAbandoned && s.Refund:
		t.Attempts--
		requeue(t, now.Add(s.RetryIn), now)
	case t.Attempts >= t.MaxAttempts:
		finish(t, lease.TaskFailed, now)
		p.record(r, lease.EventFailed, now)
	case s.Outcome == lease.RunFailed:
		delay := s.RetryIn
		if delay == 0 {
			delay = lease.Backoff(lease.DefaultBackoffBase, t.Attempts)
		}
		requeue(t, now.Add(delay), now)
	default: // abandoned: at once, or after the delay asked for
		requeue(t, now.Add(s.RetryIn), now)
	}
}

func finish(t *lease.Task, state lease.TaskState, now time.Time) {
	t.State = state
	t.FinishedAt = now
	t.UpdatedAt = now
}

func requeue(t *lease.Task, runAfter, now time.Time) {
	t.State = lease.TaskQueued
	t.RunAfter = runAfter
	t.UpdatedAt = now
}

// CancelRequested returns the live runs of runIDs whose task has a cancel
// request.
func (p *Provider) CancelRequested(ctx context.Context, runIDs []int64) ([]int64, error) {
	if _, err := p.lock(ctx); err != nil {
		return nil, fmt.Errorf("read cancel requests: %w", err)
	}
	defer p.mu.Unlock()
	out := []int64{}
	for _, id := range runIDs {
		if r := p.live[id]; r != nil && p.tasks[r.TaskID].CancelRequested {
			out = append(out, id)
		}
	}
	return out, nil
}

// Cancel cancels a queued task at once or marks a running one.
func (p *Provider) Cancel(ctx context.Context, taskID int64) (lease.TaskState, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return "", fmt.Errorf("cancel task %d: %w", taskID, err)
	}
	defer p.mu.Unlock()
	return p.cancel(taskID, now)
}

func (p *Provider) cancel(taskID int64, now time.Time) (lease.TaskState, error) {
	t := p.tasks[taskID]
	if t == nil {
		return "", fmt.Errorf("cancel task %d: %w", taskID, lease.ErrNotFound)
	}
	switch t.State {
	case lease.TaskQueued, lease.TaskWaiting:
		t.CancelRequested = true
		finish(t, lease.TaskCancelled, now)
		p.release(taskID, now)
	case lease.TaskRunning:
		t.CancelRequested = true
		t.UpdatedAt = now
	case lease.TaskDone, lease.TaskFailed:
		return t.State, fmt.Errorf("cancel task %d: %w: it is already %s", taskID, lease.ErrConflict, t.State)
	}
	return t.State, nil
}

// Retry queues a failed or cancelled task again with fresh attempts.
func (p *Provider) Retry(ctx context.Context, taskID int64) error {
	now, err := p.lock(ctx)
	if err != nil {
		return fmt.Errorf("retry task %d: %w", taskID, err)
	}
	defer p.mu.Unlock()
	_, err = p.retry(taskID, false, now)
	return err
}

// AbandonOwner abandons the running runs of owner held by one of instances.
func (p *Provider) AbandonOwner(ctx context.Context, owner string, instances []string, summary string) ([]int64, error) {
	if owner == "" {
		return nil, fmt.Errorf("abandon runs: %w: owner is empty", lease.ErrInvalid)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("abandon runs of %s: %w", owner, err)
	}
	defer p.mu.Unlock()
	var ids []int64
	for id, r := range p.live {
		if r.Owner == owner && slices.Contains(instances, r.Instance) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		p.end(p.runs[id], lease.Settlement{Outcome: lease.RunAbandoned, Summary: summary}, now)
	}
	return ids, nil
}
