package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// ClaimNotification inserts n's row unless its run, event and target have
// one already; the unique key makes the first caller the only sender.
func (p *Provider) ClaimNotification(ctx context.Context, n lease.Notification) (int64, bool, error) {
	var id int64
	first := false
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`INSERT INTO {{schema}}.notifications (task_id, run_id, event, target, sent_by)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (run_id, event, target) DO NOTHING RETURNING id`),
			n.TaskID, n.RunID, n.Event, n.Target, n.SentBy).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					first = true
					if err := rows.Scan(&id); err != nil {
						return err
					}
				}
				return rows.Err()
			})
	})
	if err != nil {
		return 0, false, fmt.Errorf("claim notification of run %d: %w", n.RunID, mapErr(err))
	}
	return id, first, nil
}

// FinishNotification records the outcome of notification id.
func (p *Provider) FinishNotification(ctx context.Context, id int64, status lease.NotificationStatus, detail string) error {
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`UPDATE {{schema}}.notifications SET status = $2, detail = $3, finished_at = clock_timestamp()
			WHERE id = $1`), id, string(status), detail)
	})
	if err != nil {
		return fmt.Errorf("finish notification %d: %w", id, mapErr(err))
	}
	return nil
}

// Notifications lists the notifications about task taskID's runs.
func (p *Provider) Notifications(ctx context.Context, taskID int64) ([]lease.Notification, error) {
	rows, err := p.query(ctx, p.sql(`SELECT id, task_id, run_id, event, target, status, detail, sent_by,
		created_at, finished_at FROM {{schema}}.notifications WHERE task_id = $1 ORDER BY id`), taskID)
	if err != nil {
		return nil, fmt.Errorf("list notifications of task %d: %w", taskID, mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Notification, error) {
		var n lease.Notification
		var finished *time.Time
		err := row.Scan(&n.ID, &n.TaskID, &n.RunID, &n.Event, &n.Target, &n.Status, &n.Detail, &n.SentBy, &n.CreatedAt, &finished)
		if finished != nil {
			n.FinishedAt = *finished
		}
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("list notifications of task %d: %w", taskID, mapErr(err))
	}
	return out, nil
}
