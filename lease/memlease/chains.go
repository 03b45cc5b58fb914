package memlease

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/qd-run/qd/lease"
)

// chain is what the provider keeps of tasks that wait for others, the
// executable spec of SQL chain_wake, chain_retry and chain_cancel.
type chain struct {
	dependents  map[int64][]int64         // task → the tasks that wait for it
	summary     map[int64]string          // task its chain cancelled → why
	cancelledBy map[int64]int64           // task its chain cancelled → the task that did
	results     map[int64]json.RawMessage // completed run → its result
}

func newChain() chain {
	return chain{dependents: map[int64][]int64{}, summary: map[int64]string{},
		cancelledBy: map[int64]int64{}, results: map[int64]json.RawMessage{}}
}

// checkAfter refuses a task to wait for that does not exist.
func (p *Provider) checkAfter(after []int64) error {
	for _, id := range after {
		if p.tasks[id] == nil {
			return fmt.Errorf("%w: after: task %d does not exist; a task may wait only for tasks already enqueued", lease.ErrInvalid, id)
		}
	}
	return nil
}

// wait makes the new task id wait for the tasks it names, and decides it.
func (p *Provider) wait(id int64, now time.Time) {
	t := p.tasks[id]
	for _, parent := range t.After {
		p.chain.dependents[parent] = append(p.chain.dependents[parent], id)
	}
	t.State = lease.TaskWaiting
	p.wake([]int64{id}, now)
}

// release wakes what waits for task id, which just reached a final state.
func (p *Provider) release(id int64, now time.Time) {
	p.wake(p.chain.dependents[id], now)
}

// wake decides the waiting tasks of ids: queued once every task they wait
// for is done (AfterAny: finished), cancelled when one of those failed or
// was cancelled (not AfterAny), and so on down the chain.
func (p *Provider) wake(ids []int64, now time.Time) {
	for len(ids) > 0 {
		var cancelled []int64
		for _, id := range sortedSet(ids) {
			t := p.tasks[id]
			if t == nil || t.State != lease.TaskWaiting {
				continue
			}
			blocker, ready := p.verdict(t)
			switch {
			case blocker != nil:
				finish(t, lease.TaskCancelled, now)
				p.chain.summary[id] = lease.WaitReason(blocker.ID, blocker.State)
				p.chain.cancelledBy[id] = blocker.ID
				cancelled = append(cancelled, id)
			case ready:
				at := t.RunAfter
				if at.Before(now) {
					at = now
				}
				requeue(t, at, now)
			}
		}
		ids = nil
		for _, id := range cancelled {
			ids = append(ids, p.chain.dependents[id]...)
		}
	}
}

// verdict is the first task t waits for that failed or was cancelled (not
// for AfterAny), and whether t may be queued.
func (p *Provider) verdict(t *lease.Task) (*lease.Task, bool) {
	ready := true
	for _, id := range t.After {
		parent := p.tasks[id]
		switch {
		case parent == nil: // pruned
		case !t.AfterAny && (parent.State == lease.TaskFailed || parent.State == lease.TaskCancelled):
			return parent, false
		case t.AfterAny && !parent.State.Finished(), !t.AfterAny && parent.State != lease.TaskDone:
			ready = false
		}
	}
	return nil, ready
}

func sortedSet(ids []int64) []int64 {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

// result is the result of the run that completed task id, nil when none.
func (p *Provider) result(id int64) json.RawMessage {
	var last int64
	for rid, r := range p.runs {
		if r.TaskID == id && r.State == lease.RunCompleted && rid > last {
			last = rid
		}
	}
	return bytes.Clone(p.chain.results[last])
}

func (p *Provider) link(id int64) lease.Link {
	v := p.taskView(p.tasks[id])
	return lease.Link{ID: id, Lane: v.Lane, Agent: v.Agent, State: v.State, Summary: v.LastSummary}
}

// Chain returns the tasks taskID waits for and those that wait for it.
func (p *Provider) Chain(ctx context.Context, taskID int64) (parents, dependents []lease.Link, err error) {
	if _, err := p.lock(ctx); err != nil {
		return nil, nil, fmt.Errorf("read the chain of task %d: %w", taskID, err)
	}
	defer p.mu.Unlock()
	t := p.tasks[taskID]
	if t == nil {
		return nil, nil, fmt.Errorf("read the chain of task %d: %w", taskID, lease.ErrNotFound)
	}
	for _, id := range t.After {
		if p.tasks[id] != nil {
			parents = append(parents, p.link(id))
		}
	}
	for _, id := range sortedSet(p.chain.dependents[taskID]) {
		if p.tasks[id] != nil {
			dependents = append(dependents, p.link(id))
		}
	}
	return parents, dependents, nil
}

// ParentResults returns the results of the tasks taskID waits for.
func (p *Provider) ParentResults(ctx context.Context, taskID int64) (map[int64]json.RawMessage, error) {
	if _, err := p.lock(ctx); err != nil {
		return nil, fmt.Errorf("read the results task %d waited for: %w", taskID, err)
	}
	defer p.mu.Unlock()
	t := p.tasks[taskID]
	if t == nil {
		return nil, fmt.Errorf("read the results task %d waited for: %w", taskID, lease.ErrNotFound)
	}
	out := map[int64]json.RawMessage{}
	for _, id := range t.After {
		if p.tasks[id] != nil {
			out[id] = p.result(id)
		}
	}
	return out, nil
}

// CancelChain cancels what waits for taskID, then taskID as Cancel does.
func (p *Provider) CancelChain(ctx context.Context, taskID int64) ([]lease.Link, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("cancel the chain of task %d: %w", taskID, err)
	}
	defer p.mu.Unlock()
	if p.tasks[taskID] == nil {
		return nil, fmt.Errorf("cancel the chain of task %d: %w", taskID, lease.ErrNotFound)
	}
	var out []lease.Link
	for _, id := range p.descendants(taskID) {
		if t := p.tasks[id]; t != nil && t.State == lease.TaskWaiting {
			finish(t, lease.TaskCancelled, now)
			p.chain.summary[id] = lease.ChainReason(taskID)
			p.chain.cancelledBy[id] = taskID
			out = append(out, p.link(id))
		}
	}
	state, err := p.cancel(taskID, now)
	if err != nil {
		return nil, err
	}
	l := p.link(taskID)
	l.State = state
	return append(out, l), nil
}

// descendants are the tasks that wait for id, directly or through others,
// by id.
func (p *Provider) descendants(id int64) []int64 {
	seen := map[int64]bool{}
	next := []int64{id}
	for len(next) > 0 {
		var more []int64
		for _, n := range next {
			for _, d := range p.chain.dependents[n] {
				if !seen[d] {
					seen[d] = true
					more = append(more, d)
				}
			}
		}
		next = more
	}
	out := make([]int64, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	slices.Sort(out)
	return out
}

// RetryChain queues taskID again with the tasks its end cancelled.
func (p *Provider) RetryChain(ctx context.Context, taskID int64) ([]lease.Link, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("retry task %d: %w", taskID, err)
	}
	defer p.mu.Unlock()
	return p.retry(taskID, true, now)
}

// retry is Retry and, with chain, RetryChain.
func (p *Provider) retry(taskID int64, chain bool, now time.Time) ([]lease.Link, error) {
	t := p.tasks[taskID]
	if t == nil {
		return nil, fmt.Errorf("retry task %d: %w", taskID, lease.ErrNotFound)
	}
	if t.State != lease.TaskFailed && t.State != lease.TaskCancelled {
		return nil, fmt.Errorf("retry task %d: %w: it is %s, not failed or cancelled", taskID, lease.ErrConflict, t.State)
	}
	if other := p.unfinishedWithKey(t.DedupeKey); other != nil {
		return nil, fmt.Errorf("retry task %d: %w: task %d holds dedupe key %q", taskID, lease.ErrConflict, other.ID, t.DedupeKey)
	}
	ids := []int64{taskID}
	if chain {
		for i := 0; i < len(ids); i++ {
			for d, by := range p.chain.cancelledBy {
				if by == ids[i] && p.tasks[d] != nil && p.tasks[d].State == lease.TaskCancelled {
					ids = append(ids, d)
				}
			}
		}
		ids = append(ids[:1], sortedSet(ids[1:])...)
	}
	for _, id := range ids {
		t := p.tasks[id]
		t.Attempts = 0
		t.CancelRequested = false
		t.FinishedAt = time.Time{}
		delete(p.chain.summary, id)
		delete(p.chain.cancelledBy, id)
		requeue(t, now, now)
		if len(t.After) > 0 {
			t.State = lease.TaskWaiting
		}
	}
	p.wake(ids, now)
	out := make([]lease.Link, 0, len(ids))
	for _, id := range ids {
		out = append(out, p.link(id))
	}
	return out, nil
}

// revive brings back what the failure of task id cancelled, now that a
// late completion made it done (SQL chain_revive).
func (p *Provider) revive(id int64, now time.Time) {
	ids := []int64{id}
	var back []int64
	for i := 0; i < len(ids); i++ {
		for d, by := range p.chain.cancelledBy {
			if by == ids[i] && p.tasks[d] != nil && p.tasks[d].State == lease.TaskCancelled {
				ids = append(ids, d)
				back = append(back, d)
			}
		}
	}
	for _, d := range back {
		t := p.tasks[d]
		t.State, t.CancelRequested, t.FinishedAt, t.UpdatedAt = lease.TaskWaiting, false, time.Time{}, now
		delete(p.chain.summary, d)
		delete(p.chain.cancelledBy, d)
	}
	p.wake(back, now)
}

// awaited reports whether a task not yet finished waits for task id: its
// result is still to be read, so a prune keeps it.
func (p *Provider) awaited(id int64) bool {
	for _, d := range p.chain.dependents[id] {
		if t := p.tasks[d]; t != nil && !t.State.Finished() {
			return true
		}
	}
	return false
}
