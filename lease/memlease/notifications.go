package memlease

import (
	"context"
	"fmt"

	"github.com/qd-run/qd/lease"
)

// ClaimNotification records n unless its run, event and target have a
// record already.
func (p *Provider) ClaimNotification(ctx context.Context, n lease.Notification) (int64, bool, error) {
	now, err := p.lock(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("claim notification of run %d: %w", n.RunID, err)
	}
	defer p.mu.Unlock()
	for _, old := range p.notes {
		if old.RunID == n.RunID && old.Event == n.Event && old.Target == n.Target {
			return old.ID, false, nil
		}
	}
	n.ID = int64(len(p.notes) + 1)
	n.Status, n.Detail, n.CreatedAt = lease.NotificationSending, "", now
	p.notes = append(p.notes, n)
	return n.ID, true, nil
}

// FinishNotification records how sending notification id went.
func (p *Provider) FinishNotification(ctx context.Context, id int64, status lease.NotificationStatus, detail string) error {
	now, err := p.lock(ctx)
	if err != nil {
		return fmt.Errorf("finish notification %d: %w", id, err)
	}
	defer p.mu.Unlock()
	if id < 1 || int(id) > len(p.notes) {
		return fmt.Errorf("finish notification %d: %w", id, lease.ErrNotFound)
	}
	n := &p.notes[id-1]
	n.Status, n.Detail, n.FinishedAt = status, detail, now
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
			out = append(out, n)
		}
	}
	return out, nil
}
