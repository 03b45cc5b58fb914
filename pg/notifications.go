package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// RecordEvent records event for run runID in the outbox, once.
func (p *Provider) RecordEvent(ctx context.Context, runID int64, event string) error {
	if !lease.ValidEvent(event) {
		return fmt.Errorf("record event of run %d: %w: %q is not an event", runID, lease.ErrInvalid, event)
	}
	found := false
	err := p.readTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`WITH r AS (SELECT r.id, r.task_id, r.agent FROM {{schema}}.runs r WHERE r.id = $1),
			i AS (INSERT INTO {{schema}}.events (task_id, run_id, event, agent)
				SELECT r.task_id, r.id, $2, r.agent FROM r ON CONFLICT (run_id, event) DO NOTHING)
			SELECT EXISTS (SELECT 1 FROM r)`), runID, event).
			QueryRow(func(row pgx.Row) error { return row.Scan(&found) })
	})
	switch {
	case err != nil:
		return fmt.Errorf("record event of run %d: %w", runID, mapErr(err))
	case !found:
		return fmt.Errorf("record event of run %d: %w", runID, lease.ErrNotFound)
	}
	return nil
}

// TakeEvents turns untaken events that routes name into pending
// notifications, skipping the events another taker holds.
func (p *Provider) TakeEvents(ctx context.Context, by string, routes []lease.NotifyRoute, limit int) (int, error) {
	if len(routes) == 0 || limit <= 0 {
		return 0, nil
	}
	agents, events, targets := make([]string, len(routes)), make([]string, len(routes)), make([]string, len(routes))
	for i, r := range routes {
		agents[i], events[i], targets[i] = r.Agent, r.Event, r.Target
	}
	var made int
	err := p.readTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`WITH w AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[]) AS w(agent, event, target)),
			ev AS (
				SELECT e.id, e.task_id, e.run_id, e.event, e.agent FROM {{schema}}.events e
				WHERE e.taken_at IS NULL AND e.agent = ANY ($2)
				  AND EXISTS (SELECT 1 FROM w WHERE w.agent = e.agent AND w.event = e.event)
				ORDER BY e.id LIMIT $5 FOR UPDATE SKIP LOCKED),
			took AS (UPDATE {{schema}}.events e SET taken_at = clock_timestamp(), taken_by = $1 FROM ev WHERE e.id = ev.id),
			ins AS (
				INSERT INTO {{schema}}.notifications (task_id, run_id, event, target, status, due_at)
				SELECT ev.task_id, ev.run_id, ev.event, w.target, 'pending', clock_timestamp()
				FROM ev JOIN w ON w.agent = ev.agent AND w.event = ev.event
				ON CONFLICT (run_id, event, target) DO NOTHING RETURNING 1)
			SELECT count(*) FROM ins`), by, agents, events, targets, limit).
			QueryRow(func(row pgx.Row) error { return row.Scan(&made) })
	})
	if err != nil {
		return 0, fmt.Errorf("take events: %w", mapErr(err))
	}
	return made, nil
}

// claimNotifications gives up the overdue pending notifications of the
// targets, then claims the due ones, oldest first, each skipping what a
// concurrent call holds. Overdue rows are left out of the claim so that
// no row is written twice by one statement.
const claimNotifications = `WITH c AS (SELECT * FROM unnest($2::text[], $3::int[]) AS c(target, n)),
	gone AS (
		UPDATE {{schema}}.notifications x SET status = 'failed', due_at = NULL, finished_at = clock_timestamp(),
			detail = CASE WHEN x.tries = 0
				THEN format('given up: not sent within %s of the event; never tried, its target failed every try meanwhile', $6::text)
				ELSE format('given up: not sent within %s of the event, after %s tries; the last: %s', $6::text, x.tries, x.detail) END
		WHERE x.id IN (SELECT y.id FROM {{schema}}.notifications y
			WHERE $5::interval IS NOT NULL AND y.target = ANY ($2) AND y.due_at IS NOT NULL AND y.status = 'pending'
			  AND y.created_at < clock_timestamp() - $5::interval
			FOR UPDATE SKIP LOCKED)
		RETURNING x.*),
	pick AS (
		SELECT k.id FROM c CROSS JOIN LATERAL (
			SELECT y.id FROM {{schema}}.notifications y
			WHERE y.target = c.target AND y.due_at <= clock_timestamp() AND y.status IN ('pending', 'sending')
			  AND NOT ($5::interval IS NOT NULL AND y.status = 'pending' AND y.created_at < clock_timestamp() - $5::interval)
			ORDER BY y.due_at, y.id LIMIT c.n FOR UPDATE SKIP LOCKED) k),
	took AS (
		UPDATE {{schema}}.notifications x SET status = 'sending', tries = x.tries + 1, sent_by = $1,
			due_at = clock_timestamp() + $4::interval
		FROM pick WHERE x.id = pick.id
		RETURNING x.*),
	n AS (SELECT true AS claimed, * FROM took UNION ALL SELECT false, * FROM gone)
	SELECT n.claimed, n.id, n.task_id, n.run_id, n.event, n.target, n.status, n.tries, n.detail, n.sent_by,
		n.created_at, n.due_at, n.finished_at, coalesce(e.created_at, n.created_at), clock_timestamp() - n.created_at,
		t.max_attempts, ` + runColumns + `
	FROM n JOIN {{schema}}.runs r ON r.id = n.run_id JOIN {{schema}}.tasks t ON t.id = n.task_id
	LEFT JOIN {{schema}}.events e ON e.run_id = n.run_id AND e.event = n.event
	ORDER BY n.due_at NULLS LAST, n.id`

// ClaimNotifications claims due notifications of c's targets and gives up
// the overdue ones, in one statement.
func (p *Provider) ClaimNotifications(ctx context.Context, c lease.NotifyClaim) ([]lease.NotificationJob, []lease.NotificationJob, error) {
	targets, ns := make([]string, 0, len(c.Targets)), make([]int32, 0, len(c.Targets))
	for _, t := range c.Targets {
		if t.N > 0 {
			targets, ns = append(targets, t.Target), append(ns, int32(t.N))
		}
	}
	var giveUp *time.Duration
	if c.GiveUp > 0 {
		giveUp = &c.GiveUp
	}
	var claimed, gaveUp []lease.NotificationJob
	err := p.readTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(claimNotifications), c.By, targets, ns, c.Lease, giveUp, c.GiveUp.String()).
			Query(func(rows pgx.Rows) error {
				for rows.Next() {
					j, took, err := scanJob(rows)
					if err != nil {
						return err
					}
					if took {
						claimed = append(claimed, j)
					} else {
						gaveUp = append(gaveUp, j)
					}
				}
				return rows.Err()
			})
	})
	if err != nil {
		return nil, nil, fmt.Errorf("claim notifications: %w", mapErr(err))
	}
	return claimed, gaveUp, nil
}

func scanJob(rows pgx.Rows) (lease.NotificationJob, bool, error) {
	var j lease.NotificationJob
	var took bool
	var due, finished *time.Time
	n := &j.Notification
	head := []any{&took, &n.ID, &n.TaskID, &n.RunID, &n.Event, &n.Target, &n.Status, &n.Tries, &n.Detail, &n.SentBy,
		&n.CreatedAt, &due, &finished, &j.EventAt, &j.Age, &j.MaxAttempts}
	r, err := scanRun(tail{rows, head})
	if err != nil {
		return j, false, err
	}
	j.Run = r
	if due != nil {
		n.DueAt = *due
	}
	if finished != nil {
		n.FinishedAt = *finished
	}
	return j, took, nil
}

// tail is a row whose first columns go to head before scanRun reads the
// rest.
type tail struct {
	pgx.Rows
	head []any
}

func (t tail) Scan(dest ...any) error { return t.Rows.Scan(append(t.head, dest...)...) }

// FinishNotification records how try of notification id went, if that try
// still holds it.
func (p *Provider) FinishNotification(ctx context.Context, id int64, try int, r lease.NotifyResult) error {
	if err := lease.ValidateNotifyResult(id, r); err != nil {
		return fmt.Errorf("finish notification: %w", err)
	}
	var done, exists bool
	err := p.readTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`WITH u AS (
				UPDATE {{schema}}.notifications SET status = $3, detail = $4,
					due_at = CASE WHEN $3 = 'pending' THEN clock_timestamp() + $5::interval END,
					finished_at = CASE WHEN $3 <> 'pending' THEN clock_timestamp() END
				WHERE id = $1 AND status = 'sending' AND tries = $2 RETURNING 1)
			SELECT EXISTS (SELECT 1 FROM u), EXISTS (SELECT 1 FROM {{schema}}.notifications WHERE id = $1)`),
			id, try, string(r.Status), r.Detail, r.RetryIn).
			QueryRow(func(row pgx.Row) error { return row.Scan(&done, &exists) })
	})
	switch {
	case err != nil:
		return fmt.Errorf("finish notification %d: %w", id, mapErr(err))
	case !exists:
		return fmt.Errorf("finish notification %d: %w", id, lease.ErrNotFound)
	case !done:
		return fmt.Errorf("finish notification %d try %d: %w", id, try, lease.ErrLeaseLost)
	}
	return nil
}

// Notifications lists the notifications about task taskID's runs.
func (p *Provider) Notifications(ctx context.Context, taskID int64) ([]lease.Notification, error) {
	rows, err := p.query(ctx, p.sql(`SELECT id, task_id, run_id, event, target, status, tries, detail, sent_by,
		created_at, due_at, finished_at FROM {{schema}}.notifications WHERE task_id = $1 ORDER BY id`), taskID)
	if err != nil {
		return nil, fmt.Errorf("list notifications of task %d: %w", taskID, mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.Notification, error) {
		var n lease.Notification
		var due, finished *time.Time
		err := row.Scan(&n.ID, &n.TaskID, &n.RunID, &n.Event, &n.Target, &n.Status, &n.Tries, &n.Detail, &n.SentBy,
			&n.CreatedAt, &due, &finished)
		if due != nil {
			n.DueAt = *due
		}
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
