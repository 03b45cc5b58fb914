package pg

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/lease"
)

// linkColumns are a lease.Link of the task t.
const linkColumns = `t.id, t.lane, t.agent, t.state,
	coalesce(t.summary, (SELECT r.summary FROM {{schema}}.runs r WHERE r.task_id = t.id ORDER BY r.id DESC LIMIT 1), '')`

func scanLink(row pgx.CollectableRow) (lease.Link, error) {
	var l lease.Link
	err := row.Scan(&l.ID, &l.Lane, &l.Agent, &l.State, &l.Summary)
	return l, err
}

// Chain returns the tasks taskID waits for and those that wait for it.
func (p *Provider) Chain(ctx context.Context, taskID int64) (parents, dependents []lease.Link, err error) {
	if _, err := p.Task(ctx, taskID); err != nil {
		return nil, nil, err
	}
	if parents, err = p.links(ctx, `d.task_id = $1 AND t.id = d.parent_id`, taskID); err != nil {
		return nil, nil, err
	}
	if dependents, err = p.links(ctx, `d.parent_id = $1 AND t.id = d.task_id`, taskID); err != nil {
		return nil, nil, err
	}
	return parents, dependents, nil
}

func (p *Provider) links(ctx context.Context, on string, taskID int64) ([]lease.Link, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+linkColumns+` FROM {{schema}}.task_deps d
		JOIN {{schema}}.tasks t ON `+on+` ORDER BY t.id`), taskID)
	if err != nil {
		return nil, fmt.Errorf("read the chain of task %d: %w", taskID, mapErr(err))
	}
	out, err := pgx.CollectRows(rows, scanLink)
	if err != nil {
		return nil, fmt.Errorf("read the chain of task %d: %w", taskID, mapErr(err))
	}
	return out, nil
}

// ParentResults returns the results of the tasks taskID waits for, in one
// read (a daemon makes it before each run starts): a task that waits for
// none is one row with a NULL parent.
func (p *Provider) ParentResults(ctx context.Context, taskID int64) (map[int64]json.RawMessage, error) {
	rows, err := p.query(ctx, p.sql(`SELECT d.parent_id, (SELECT r.result FROM {{schema}}.runs r
			WHERE r.task_id = d.parent_id AND r.state = 'completed' ORDER BY r.id DESC LIMIT 1)
		FROM {{schema}}.tasks t LEFT JOIN {{schema}}.task_deps d ON d.task_id = t.id WHERE t.id = $1`), taskID)
	if err != nil {
		return nil, fmt.Errorf("read the results task %d waited for: %w", taskID, mapErr(err))
	}
	out := map[int64]json.RawMessage{}
	var id *int64
	var res *string
	n, err := pgx.ForEachRow(rows, []any{&id, &res}, func() error {
		switch {
		case id == nil:
		case res == nil:
			out[*id] = nil
		default:
			out[*id] = json.RawMessage(*res)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the results task %d waited for: %w", taskID, mapErr(err))
	}
	if n.RowsAffected() == 0 {
		return nil, fmt.Errorf("read the results task %d waited for: %w", taskID, lease.ErrNotFound)
	}
	return out, nil
}

// CancelChain cancels what waits for taskID, then taskID as Cancel does.
func (p *Provider) CancelChain(ctx context.Context, taskID int64) ([]lease.Link, error) {
	var ids []int64
	var after, before *string
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`SELECT id FROM {{schema}}.chain_cancel($1) ORDER BY id`), taskID).
			Query(func(rows pgx.Rows) error {
				var err error
				ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
				return err
			})
		p.queueCancel(b, taskID, &after, &before)
	})
	if err != nil {
		return nil, fmt.Errorf("cancel the chain of task %d: %w", taskID, mapErr(err))
	}
	state, err := cancelled(taskID, after, before)
	if err != nil {
		return nil, err
	}
	out := make([]lease.Link, 0, len(ids)+1)
	for _, id := range ids {
		t, err := p.Task(ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, lease.Link{ID: id, Lane: t.Lane, Agent: t.Agent, State: t.State, Summary: t.LastSummary})
	}
	t, err := p.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	return append(out, lease.Link{ID: taskID, Lane: t.Lane, Agent: t.Agent, State: state, Summary: t.LastSummary}), nil
}

// RetryChain queues taskID again with the tasks its end cancelled.
func (p *Provider) RetryChain(ctx context.Context, taskID int64) ([]lease.Link, error) {
	return p.retryChain(ctx, p.inTx, taskID, true)
}
