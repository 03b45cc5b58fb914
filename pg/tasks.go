package pg

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// Enqueue adds a task, or returns the unfinished task with the same dedupe
// key.
func (p *Provider) Enqueue(ctx context.Context, ep lease.EnqueueParams) (int64, bool, error) {
	return p.enqueue(ctx, p.inTx, ep)
}

// txFunc runs a batch in one transaction on one of the pools: inTx or
// readTx.
type txFunc func(ctx context.Context, queue func(b *pgx.Batch)) error

func (p *Provider) enqueue(ctx context.Context, inTx txFunc, ep lease.EnqueueParams) (int64, bool, error) {
	if err := lease.ValidateEnqueue(&ep); err != nil {
		return 0, false, fmt.Errorf("enqueue: %w", err)
	}
	var id int64
	var existed bool
	err := inTx(ctx, func(b *pgx.Batch) { p.queueEnqueue(b, &ep, &id, &existed) })
	if err != nil {
		return 0, false, fmt.Errorf("enqueue: %w", mapErr(err))
	}
	return id, existed, nil
}

func (p *Provider) queueEnqueue(b *pgx.Batch, ep *lease.EnqueueParams, id *int64, existed *bool) {
	var runAfter *time.Time
	if !ep.RunAfter.IsZero() {
		runAfter = &ep.RunAfter
	}
	var parent *int64
	if ep.ParentRun != 0 {
		parent = &ep.ParentRun
	}
	scan := func(row pgx.Row) error { return row.Scan(id, existed) }
	if len(ep.After) == 0 {
		b.Queue(p.sql(`SELECT id, existed FROM {{schema}}.enqueue($1, $2, $3, $4, $5, $6, $7, $8, $9)`),
			ep.Lane, ep.Agent, string(ep.Payload), ep.Priority, runAfter, ep.Delay, ep.MaxAttempts, nullString(ep.DedupeKey), parent).
			QueryRow(scan)
		return
	}
	b.Queue(p.sql(`SELECT id, existed FROM {{schema}}.enqueue_after($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)`),
		ep.Lane, ep.Agent, string(ep.Payload), ep.Priority, runAfter, ep.Delay, ep.MaxAttempts, nullString(ep.DedupeKey), parent,
		ep.After, ep.AfterAny).
		QueryRow(scan)
}

// CancelRequested returns the live runs of runIDs whose task has a cancel
// request, through the primary keys of runs and tasks. The supervisor
// polls it for its runs: it is on the lease path's pool.
func (p *Provider) CancelRequested(ctx context.Context, runIDs []int64) ([]int64, error) {
	out := []int64{}
	if len(runIDs) == 0 {
		return out, nil
	}
	rows, err := p.queryOn(ctx, p.pool, p.sql(`SELECT r.id FROM {{schema}}.runs r
		JOIN {{schema}}.tasks t ON t.id = r.task_id
		WHERE r.id = ANY ($1) AND r.state = 'running' AND t.cancel_requested
		ORDER BY r.id`), runIDs)
	if err != nil {
		return nil, fmt.Errorf("read cancel requests: %w", mapErr(err))
	}
	out, err = pgx.AppendRows(out, rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("read cancel requests: %w", mapErr(err))
	}
	return out, nil
}

// Cancel cancels a queued task, or marks a running one for its holder.
func (p *Provider) Cancel(ctx context.Context, taskID int64) (lease.TaskState, error) {
	return p.cancel(ctx, p.inTx, taskID)
}

func (p *Provider) cancel(ctx context.Context, inTx txFunc, taskID int64) (lease.TaskState, error) {
	var after, before *string
	err := inTx(ctx, func(b *pgx.Batch) { p.queueCancel(b, taskID, &after, &before) })
	if err != nil {
		return "", fmt.Errorf("cancel task %d: %w", taskID, mapErr(err))
	}
	return cancelled(taskID, after, before)
}

// queueCancel queues the cancel of taskID: its state after (nil when it
// could not be cancelled) and before.
func (p *Provider) queueCancel(b *pgx.Batch, taskID int64, after, before **string) {
	b.Queue(p.sql(`
			WITH u AS (
				UPDATE {{schema}}.tasks t SET
					state = CASE WHEN t.state IN ('queued', 'waiting') THEN 'cancelled' ELSE t.state END,
					cancel_requested = true,
					finished_at = CASE WHEN t.state IN ('queued', 'waiting') THEN clock_timestamp() ELSE t.finished_at END,
					updated_at = clock_timestamp()
				WHERE t.id = $1 AND t.state IN ('queued', 'waiting', 'running')
				RETURNING t.state)
			SELECT (SELECT state FROM u), (SELECT state FROM {{schema}}.tasks WHERE id = $1)`), taskID).
		QueryRow(func(row pgx.Row) error { return row.Scan(after, before) })
	// A new statement: what waits for a task cancelled now is woken
	// (cancelled in turn, or queued when it waits for any end).
	b.Queue(p.sql(`SELECT {{schema}}.chain_release(ARRAY[$1::bigint])`), taskID)
}

// cancelled is the answer to a cancel of taskID that left it in state
// after (nil: not changed) from before (nil: no such task).
func cancelled(taskID int64, after, before *string) (lease.TaskState, error) {
	switch {
	case after != nil:
		return lease.TaskState(*after), nil
	case before == nil:
		return "", fmt.Errorf("cancel task %d: %w", taskID, lease.ErrNotFound)
	case lease.TaskState(*before) == lease.TaskCancelled:
		return lease.TaskCancelled, nil
	default:
		return lease.TaskState(*before), fmt.Errorf("cancel task %d: %w: it is already %s", taskID, lease.ErrConflict, *before)
	}
}

// Retry queues a failed or cancelled task again with fresh attempts.
func (p *Provider) Retry(ctx context.Context, taskID int64) error {
	return p.retry(ctx, p.inTx, taskID)
}

func (p *Provider) retry(ctx context.Context, inTx txFunc, taskID int64) error {
	_, err := p.retryChain(ctx, inTx, taskID, false)
	return err
}

// retryChain is Retry, and with chain RetryChain: SQL chain_retry.
func (p *Provider) retryChain(ctx context.Context, inTx txFunc, taskID int64, chain bool) ([]lease.Link, error) {
	var links []lease.Link
	var before *string
	err := inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT id, lane, agent, state, summary FROM {{schema}}.chain_retry($1, $2)`), taskID, chain).
			Query(func(rows pgx.Rows) error {
				var err error
				links, err = pgx.CollectRows(rows, scanLink)
				return err
			})
		b.Queue(p.sql(`SELECT state FROM {{schema}}.tasks WHERE id = $1`), taskID).
			Query(func(rows pgx.Rows) error {
				states, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if len(states) == 1 {
					before = &states[0]
				}
				return err
			})
	})
	switch {
	case err != nil:
		return nil, fmt.Errorf("retry task %d: %w", taskID, mapErr(err))
	case len(links) > 0:
		return links, nil
	case before == nil:
		return nil, fmt.Errorf("retry task %d: %w", taskID, lease.ErrNotFound)
	default:
		return nil, fmt.Errorf("retry task %d: %w: it is %s, not failed or cancelled", taskID, lease.ErrConflict, *before)
	}
}

const taskColumns = `t.id, t.lane, t.agent, t.payload_text, t.priority, t.run_after, t.attempts, t.max_attempts,
	t.state, coalesce(t.dedupe_key, ''), t.cancel_requested, t.created_at, t.updated_at, t.finished_at,
	coalesce(t.parent_run, 0),
	coalesce(t.summary, (SELECT r.summary FROM {{schema}}.runs r WHERE r.task_id = t.id ORDER BY r.id DESC LIMIT 1), ''),
	ARRAY(SELECT d.parent_id FROM {{schema}}.task_deps d WHERE d.task_id = t.id ORDER BY d.parent_id), t.after_any,
	t.deferrals`

func scanTask(row pgx.CollectableRow) (lease.Task, error) {
	var t lease.Task
	var payload string
	var finished *time.Time
	err := row.Scan(&t.ID, &t.Lane, &t.Agent, &payload, &t.Priority, &t.RunAfter, &t.Attempts, &t.MaxAttempts,
		&t.State, &t.DedupeKey, &t.CancelRequested, &t.CreatedAt, &t.UpdatedAt, &finished, &t.ParentRun, &t.LastSummary,
		&t.After, &t.AfterAny, &t.Deferrals)
	fillTask(&t, payload, finished)
	return t, err
}

func fillTask(t *lease.Task, payload string, finished *time.Time) {
	if len(t.After) == 0 {
		t.After = nil
	}
	t.Payload = json.RawMessage(payload)
	if finished != nil {
		t.FinishedAt = *finished
	}
}

// Task returns one task.
func (p *Provider) Task(ctx context.Context, id int64) (lease.Task, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+taskColumns+`,
		CASE WHEN t.state = 'done' THEN (SELECT r.result FROM {{schema}}.runs r
			WHERE r.task_id = t.id AND r.state = 'completed' ORDER BY r.id DESC LIMIT 1) END
		FROM {{schema}}.tasks t WHERE t.id = $1`), id)
	if err != nil {
		return lease.Task{}, fmt.Errorf("read task %d: %w", id, mapErr(err))
	}
	t, err := pgx.CollectExactlyOneRow(rows, scanTaskResult)
	if err != nil {
		return lease.Task{}, fmt.Errorf("read task %d: %w", id, mapErr(err))
	}
	return t, nil
}

// scanTaskResult is scanTask with the result of the task's completing run
// last, as Task reads it in the same statement.
func scanTaskResult(row pgx.CollectableRow) (lease.Task, error) {
	var t lease.Task
	var payload string
	var finished *time.Time
	var result *string
	err := row.Scan(&t.ID, &t.Lane, &t.Agent, &payload, &t.Priority, &t.RunAfter, &t.Attempts, &t.MaxAttempts,
		&t.State, &t.DedupeKey, &t.CancelRequested, &t.CreatedAt, &t.UpdatedAt, &finished, &t.ParentRun, &t.LastSummary,
		&t.After, &t.AfterAny, &t.Deferrals, &result)
	fillTask(&t, payload, finished)
	if result != nil {
		t.Result = json.RawMessage(*result)
	}
	return t, err
}

// Tasks lists tasks, newest first.
func (p *Provider) Tasks(ctx context.Context, f lease.TaskFilter) ([]lease.Task, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Lane != "" {
		add("t.lane = $%d", f.Lane)
	}
	if f.Agent != "" {
		add("t.agent = $%d", f.Agent)
	}
	if f.State != "" {
		add("t.state = $%d", string(f.State))
	}
	q := `SELECT ` + taskColumns + ` FROM {{schema}}.tasks t` + whereClause(where) + ` ORDER BY t.id DESC`
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := p.query(ctx, p.sql(q), args...)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", mapErr(err))
	}
	ts, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return nil, fmt.Errorf("list tasks: %w", mapErr(err))
	}
	return ts, nil
}

func whereClause(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

const runColumns = `r.id, r.task_id, r.lane, r.agent, r.attempt, r.owner, r.instance, r.state, coalesce(r.pid, 0),
	r.started_at, r.last_heartbeat_at, r.lease_expires_at, r.last_output_at, r.finished_at, r.exit_code,
	coalesce(r.signal, ''), coalesce(r.summary, ''), coalesce(r.output_tail, ''), coalesce(r.log_error, ''), r.cpu_usec, r.memory_peak, t.cancel_requested,
	CASE WHEN r.state = 'running' THEN extract(epoch FROM clock_timestamp() - r.last_heartbeat_at)::float8 ELSE 0 END,
	CASE WHEN r.state = 'running' THEN greatest(r.lease_expires_at - clock_timestamp(), interval '0') ELSE interval '0' END,
	r.deferred, r.usage::float8, coalesce(r.usage_note, '')`

func scanRun(row pgx.CollectableRow) (lease.Run, error) {
	var r lease.Run
	var output, finished *time.Time
	var cpu *int64
	err := row.Scan(&r.ID, &r.TaskID, &r.Lane, &r.Agent, &r.Attempt, &r.Owner, &r.Instance, &r.State, &r.PID,
		&r.StartedAt, &r.LastHeartbeatAt, &r.LeaseExpiresAt, &output, &finished, &r.ExitCode,
		&r.Signal, &r.Summary, &r.OutputTail, &r.LogError, &cpu, &r.MemoryPeak, &r.CancelRequested, &r.SilentSeconds, &r.LeaseLeft,
		&r.Deferred, &r.Usage, &r.UsageNote)
	if cpu != nil {
		d := time.Duration(*cpu) * time.Microsecond
		r.CPUTime = &d
	}
	if output != nil {
		r.LastOutputAt = *output
	}
	if finished != nil {
		r.FinishedAt = *finished
	}
	return r, err
}

// Run returns one run.
func (p *Provider) Run(ctx context.Context, id int64) (lease.Run, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+runColumns+` FROM {{schema}}.runs r
		JOIN {{schema}}.tasks t ON t.id = r.task_id WHERE r.id = $1`), id)
	if err != nil {
		return lease.Run{}, fmt.Errorf("read run %d: %w", id, mapErr(err))
	}
	r, err := pgx.CollectExactlyOneRow(rows, scanRun)
	if err != nil {
		return lease.Run{}, fmt.Errorf("read run %d: %w", id, mapErr(err))
	}
	return r, nil
}

// Runs lists runs newest first; with TaskID set, in attempt order.
func (p *Provider) Runs(ctx context.Context, f lease.RunFilter) ([]lease.Run, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	order := " ORDER BY r.id DESC"
	if f.TaskID != 0 {
		add("r.task_id = $%d", f.TaskID)
		order = " ORDER BY r.attempt, r.id"
	}
	if f.Lane != "" {
		add("r.lane = $%d", f.Lane)
	}
	if f.State != "" {
		add("r.state = $%d", string(f.State))
	}
	if f.Owner != "" {
		add("r.owner = $%d", f.Owner)
	}
	if f.Agent != "" {
		add("r.agent = $%d", f.Agent)
	}
	if !f.StartedAfter.IsZero() {
		add("r.started_at > $%d", f.StartedAfter)
	}
	if f.AfterID > 0 {
		add("r.id > $%d", f.AfterID)
	}
	q := `SELECT ` + runColumns + ` FROM {{schema}}.runs r JOIN {{schema}}.tasks t ON t.id = r.task_id` +
		whereClause(where) + order
	if f.Limit > 0 {
		q += fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	rows, err := p.query(ctx, p.sql(q), args...)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", mapErr(err))
	}
	rs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", mapErr(err))
	}
	return rs, nil
}

// Prune deletes finished tasks, and their runs, events and notifications,
// that finished more than olderThan ago, but those that a task not yet
// finished waits for (its result is still to be read).
func (p *Provider) Prune(ctx context.Context, olderThan time.Duration, dryRun bool) (lease.PruneResult, error) {
	if olderThan < 0 {
		return lease.PruneResult{}, fmt.Errorf("prune: %w: age %s is negative", lease.ErrInvalid, olderThan)
	}
	doomed := `SELECT t.id FROM {{schema}}.tasks t
		WHERE t.finished_at IS NOT NULL AND t.finished_at < clock_timestamp() - $1::interval
		  AND t.state IN ('done', 'failed', 'cancelled')
		  AND NOT EXISTS (SELECT 1 FROM {{schema}}.task_deps d JOIN {{schema}}.tasks w ON w.id = d.task_id
		                  WHERE d.parent_id = t.id AND w.state IN ('waiting', 'queued', 'running'))`
	q := `WITH d AS (` + doomed + `),
		r AS (SELECT r.id FROM {{schema}}.runs r WHERE r.task_id IN (SELECT id FROM d))
		SELECT (SELECT count(*) FROM d), coalesce((SELECT array_agg(id ORDER BY id) FROM r), '{}')`
	if !dryRun {
		q = `WITH d AS (DELETE FROM {{schema}}.tasks x WHERE x.id IN (` + doomed + `) RETURNING x.id),
		r AS (SELECT r.id FROM {{schema}}.runs r WHERE r.task_id IN (SELECT id FROM d)),
		e AS (DELETE FROM {{schema}}.events e WHERE e.task_id IN (SELECT id FROM d)),
		n AS (DELETE FROM {{schema}}.notifications n WHERE n.task_id IN (SELECT id FROM d))
		SELECT (SELECT count(*) FROM d), coalesce((SELECT array_agg(id ORDER BY id) FROM r), '{}')`
	}
	var res lease.PruneResult
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(q), olderThan).QueryRow(func(row pgx.Row) error { return row.Scan(&res.Tasks, &res.RunIDs) })
	})
	if err != nil {
		return lease.PruneResult{}, fmt.Errorf("prune: %w", mapErr(err))
	}
	res.Runs = int64(len(res.RunIDs))
	return res, nil
}

// periodicAhead is how far ahead of the database's clock a periodic tick
// may be. Ticks are recorded in order, so a tick from a host whose clock
// runs ahead would hold back every daemon's ticks until the database's
// clock caught up with it.
const periodicAhead = 10 * time.Second

// PeriodicTick records tick for name and enqueues ep in the same
// transaction, exactly once per tick across every caller: a concurrent
// caller waits on the periodic row and then finds the tick recorded. A
// tick more than periodicAhead ahead of the database's clock is refused.
func (p *Provider) PeriodicTick(ctx context.Context, name string, tick time.Time, ep lease.EnqueueParams) (bool, error) {
	if name == "" {
		return false, fmt.Errorf("periodic tick: %w: name is empty", lease.ErrInvalid)
	}
	if err := lease.ValidateEnqueue(&ep); err != nil {
		return false, fmt.Errorf("periodic %s: %w", name, err)
	}
	tx, err := p.beginTx(ctx, p.pool)
	if err != nil {
		return false, fmt.Errorf("periodic %s: %w", name, err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // after commit it is a no-op
	var dbNow time.Time
	if err := tx.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&dbNow); err != nil {
		return false, fmt.Errorf("periodic %s: %w", name, mapErr(err))
	}
	if ahead := tick.Sub(dbNow); ahead > periodicAhead {
		return false, fmt.Errorf("periodic %s: %w: tick %s is %s ahead of the database's clock; this host's clock is off (fix it, with NTP say): a tick from its future would hold back every daemon's ticks of %s until then",
			name, lease.ErrInvalid, tick.Format(time.RFC3339), ahead.Round(time.Second), name)
	}
	rows, err := tx.Query(ctx, p.sql(`INSERT INTO {{schema}}.periodic AS p (name, last_tick) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET last_tick = excluded.last_tick
		WHERE p.last_tick IS NULL OR p.last_tick < excluded.last_tick
		RETURNING true`), name, tick)
	if err != nil {
		return false, fmt.Errorf("periodic %s: %w", name, mapErr(err))
	}
	fired := rows.Next()
	rows.Close()
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("periodic %s: %w", name, mapErr(err))
	}
	if !fired {
		return false, nil
	}
	b := &pgx.Batch{}
	var id int64
	var existed bool
	p.queueEnqueue(b, &ep, &id, &existed)
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return false, fmt.Errorf("periodic %s: enqueue: %w", name, mapErr(err))
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("periodic %s: commit: %w", name, mapErr(err))
	}
	return true, nil
}

// PeriodicLast returns the last recorded tick of name, zero if none.
func (p *Provider) PeriodicLast(ctx context.Context, name string) (time.Time, error) {
	rows, err := p.query(ctx, p.sql(`SELECT last_tick FROM {{schema}}.periodic WHERE name = $1`), name)
	if err != nil {
		return time.Time{}, fmt.Errorf("read periodic %s: %w", name, mapErr(err))
	}
	last, err := pgx.CollectRows(rows, pgx.RowTo[*time.Time])
	if err != nil {
		return time.Time{}, fmt.Errorf("read periodic %s: %w", name, mapErr(err))
	}
	if len(last) == 0 || last[0] == nil {
		return time.Time{}, nil
	}
	return *last[0], nil
}
