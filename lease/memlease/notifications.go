package memlease

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/qd-run/qd/lease"
)

// event is one row of the outbox.
type event struct {
	id, taskID, runID int64
	event, agent      string
	at                time.Time
	taken             bool
}

// record adds the event of run r unless the run has it already; the
// caller holds the mutex.
func (p *Provider) record(r *lease.Run, name string, now time.Time) {
	for _, e := range p.events {
		if e.runID == r.ID && e.event == name {
			return
		}
	}
	p.lastEvent++
	p.events = append(p.events, &event{id: p.lastEvent, taskID: r.TaskID, runID: r.ID, event: name, agent: r.Agent, at: now})
}

// RecordEvent records that run runID met event.
func (p *Provider) RecordEvent(ctx context.Context, runID int64, name string) error {
	if !lease.ValidEvent(name) {
		return fmt.Errorf("record event of run %d: %w: %q is not an event", runID, lease.ErrInvalid, name)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return fmt.Errorf("record event of run %d: %w", runID, err)
	}
	defer p.mu.Unlock()
	r := p.runs[runID]
	if r == nil {
		return fmt.Errorf("record event of run %d: %w", runID, lease.ErrNotFound)
	}
	p.record(r, name, now)
	return nil
}

// TakeEvents turns the untaken events that routes name into notifications.
func (p *Provider) TakeEvents(ctx context.Context, by string, routes []lease.NotifyRoute, limit int) (int, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return 0, fmt.Errorf("take events: %w", err)
	}
	defer p.mu.Unlock()
	made, taken := 0, 0
	for _, e := range p.events {
		if e.taken || taken >= limit {
			continue
		}
		for _, rt := range routes {
			if rt.Agent != e.agent || rt.Event != e.event {
				continue
			}
			e.taken = true
			if p.note(e, rt.Target, now) {
				made++
			}
		}
		if e.taken {
			taken++
		}
	}
	return made, nil
}

// note adds the pending notification of e to target unless its run, event
// and target have one.
func (p *Provider) note(e *event, target string, now time.Time) bool {
	for _, n := range p.notes {
		if n.RunID == e.runID && n.Event == e.event && n.Target == target {
			return false
		}
	}
	p.lastNote++
	p.notes[p.lastNote] = &lease.Notification{ID: p.lastNote, TaskID: e.taskID, RunID: e.runID, Event: e.event,
		Target: target, Status: lease.NotificationPending, CreatedAt: now, DueAt: now}
	return true
}

// ClaimNotifications claims due notifications of c's targets and gives up
// the pending ones older than c.GiveUp.
func (p *Provider) ClaimNotifications(ctx context.Context, c lease.NotifyClaim) ([]lease.NotificationJob, []lease.NotificationJob, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("claim notifications: %w", err)
	}
	defer p.mu.Unlock()
	var claimed, gaveUp []lease.NotificationJob
	for _, tc := range c.Targets {
		for _, n := range p.byTarget(tc.Target) {
			if n.Status == lease.NotificationPending && c.GiveUp > 0 && now.Sub(n.CreatedAt) > c.GiveUp {
				n.Detail = lease.GiveUpDetail(c.GiveUp, n.Tries, n.Detail)
				n.Status, n.DueAt, n.FinishedAt = lease.NotificationFailed, time.Time{}, now
				gaveUp = append(gaveUp, p.job(n, now))
			}
		}
		got := 0
		for _, n := range p.byTarget(tc.Target) {
			due := (n.Status == lease.NotificationPending || n.Status == lease.NotificationSending) && !n.DueAt.After(now)
			if got >= tc.N || !due {
				continue
			}
			n.Status, n.Tries, n.SentBy, n.DueAt = lease.NotificationSending, n.Tries+1, c.By, now.Add(c.Lease)
			claimed = append(claimed, p.job(n, now))
			got++
		}
	}
	return claimed, gaveUp, nil
}

// byTarget lists the unfinished notifications of target, the oldest due
// first.
func (p *Provider) byTarget(target string) []*lease.Notification {
	var out []*lease.Notification
	for _, n := range p.notes {
		if n.Target == target && !n.DueAt.IsZero() {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].DueAt.Equal(out[j].DueAt) {
			return out[i].DueAt.Before(out[j].DueAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

func (p *Provider) job(n *lease.Notification, now time.Time) lease.NotificationJob {
	j := lease.NotificationJob{Notification: *n}
	if r := p.runs[n.RunID]; r != nil {
		j.Run = p.runView(r, now)
	}
	if t := p.tasks[n.TaskID]; t != nil {
		j.MaxAttempts = t.MaxAttempts
	}
	for _, e := range p.events {
		if e.runID == n.RunID && e.event == n.Event {
			j.EventAt, j.Age = e.at, now.Sub(e.at)
		}
	}
	return j
}

// FinishNotification records how try of notification id went.
func (p *Provider) FinishNotification(ctx context.Context, id int64, try int, r lease.NotifyResult) error {
	if err := lease.ValidateNotifyResult(id, r); err != nil {
		return fmt.Errorf("finish notification: %w", err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return fmt.Errorf("finish notification %d: %w", id, err)
	}
	defer p.mu.Unlock()
	n := p.notes[id]
	if n == nil {
		return fmt.Errorf("finish notification %d: %w", id, lease.ErrNotFound)
	}
	if n.Status != lease.NotificationSending || n.Tries != try {
		return fmt.Errorf("finish notification %d try %d: %w", id, try, lease.ErrLeaseLost)
	}
	n.Status, n.Detail = r.Status, r.Detail
	if r.Status == lease.NotificationPending {
		n.DueAt = now.Add(r.RetryIn)
	} else {
		n.DueAt, n.FinishedAt = time.Time{}, now
	}
	return nil
}

// Notifications lists the notifications about task taskID's runs.
func (p *Provider) Notifications(ctx context.Context, taskID int64) ([]lease.Notification, error) {
	if _, err := p.lock(ctx); err != nil {
		return nil, fmt.Errorf("list notifications of task %d: %w", taskID, err)
	}
	defer p.mu.Unlock()
	out := []lease.Notification{}
	for _, n := range p.notes {
		if n.TaskID == taskID {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// forget drops the events and notifications of the tasks in gone.
func (p *Provider) forget(gone map[int64]bool) {
	kept := p.events[:0]
	for _, e := range p.events {
		if !gone[e.taskID] {
			kept = append(kept, e)
		}
	}
	p.events = kept
	for id, n := range p.notes {
		if gone[n.TaskID] {
			delete(p.notes, id)
		}
	}
}
