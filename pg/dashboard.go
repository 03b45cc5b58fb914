package pg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qd-run/qd/lease"
)

// The dashboard's reads (package ui). Each one goes through an index of
// migration 011 or an older one, and none reads more than a bounded number
// of rows: counts stop at CountCap and estimate beyond it, the payload
// search looks at TextScanCap tasks at most, bulk changes go in batches.
// All of them, and the dashboard's writes, are on the read pool.

// Dashboard is the provider as the dashboard uses it (ui.Store): its
// reads are on the read pool, and so here are its enqueue, cancel, retry
// and lane changes, so that no page can take a connection of the lease
// path.
type Dashboard struct{ *Provider }

// Dashboard returns the provider as the dashboard uses it.
func (p *Provider) Dashboard() Dashboard { return Dashboard{p} }

func (d Dashboard) Enqueue(ctx context.Context, ep lease.EnqueueParams) (int64, bool, error) {
	return d.enqueue(ctx, d.readTx, ep)
}

func (d Dashboard) Cancel(ctx context.Context, taskID int64) (lease.TaskState, error) {
	return d.cancel(ctx, d.readTx, taskID)
}

func (d Dashboard) Retry(ctx context.Context, taskID int64) error {
	return d.retry(ctx, d.readTx, taskID)
}

func (d Dashboard) SetLane(ctx context.Context, u lease.LaneUpdate) (lease.Lane, error) {
	return d.setLane(ctx, d.readTx, u)
}

// CountCap is where a count stops counting and asks the planner instead.
const CountCap = 50_000

// CountBudget is how long a count may take, unless its query says
// otherwise, before it settles for the planner's estimate: a filter whose
// index is not selective (a lane and a state that never meet) would read
// every entry of the index to count few rows or none.
const CountBudget = 50 * time.Millisecond

// TextScanCap is how many of the tasks matching a listing's other filters
// (newest first) a payload search looks at.
const TextScanCap = 100_000

// WaitSample is about how many runs a throughput chart's queue wait
// percentiles read at most: past it they come from a sample (1 in k runs,
// by task id).
const WaitSample = 10_000

// bulkBatch is how many tasks one statement of a bulk change touches.
const bulkBatch = 1000

// taskWhere turns q into conditions on tasks t, numbering its arguments
// after those already in args. The text condition is returned apart: it
// applies after the scan cap.
func taskWhere(q lease.TaskQuery, states []lease.TaskState, args []any) (where []string, text string, _ []any) {
	add := func(cond string, v any) string {
		args = append(args, v)
		return fmt.Sprintf(cond, len(args))
	}
	if q.Lane != "" {
		where = append(where, add("t.lane = $%d", q.Lane))
	}
	if q.Agent != "" {
		where = append(where, add("t.agent = $%d", q.Agent))
	}
	if q.State != "" {
		where = append(where, add("t.state = $%d", string(q.State)))
	}
	if len(states) > 0 {
		ss := make([]string, len(states))
		for i, s := range states {
			ss[i] = string(s)
		}
		where = append(where, add("t.state = ANY ($%d)", ss))
	}
	// Ids grow with created_at, so a time range is also a range of ids,
	// found with one probe of tasks_created_at_idx each; the id range is
	// what the other indexes, all ending in id, can use.
	if !q.From.IsZero() {
		n := add("$%d", q.From)
		where = append(where, "t.created_at >= "+n, `t.id >= coalesce((SELECT x.id FROM {{schema}}.tasks x
			WHERE x.created_at >= `+n+` ORDER BY x.created_at LIMIT 1), 9223372036854775807)`)
	}
	if !q.To.IsZero() {
		n := add("$%d", q.To)
		where = append(where, "t.created_at < "+n, `t.id <= coalesce((SELECT x.id FROM {{schema}}.tasks x
			WHERE x.created_at < `+n+` ORDER BY x.created_at DESC LIMIT 1), 0)`)
	}
	if q.Before > 0 {
		where = append(where, add("t.id < $%d", q.Before))
	}
	if q.Text != "" {
		text = add("strpos(lower(t.payload_text), lower($%d)) > 0", q.Text)
	}
	return where, text, args
}

// FindTasks lists the tasks q selects, newest first, at most q.Limit (50
// when zero). With q.Text it looks only at the TextScanCap newest tasks
// the other filters keep.
func (p *Provider) FindTasks(ctx context.Context, q lease.TaskQuery) ([]lease.Task, error) {
	limit := q.Limit
	if limit <= 0 {
		limit = 50
	}
	where, text, args := taskWhere(q, nil, nil)
	sql := `SELECT ` + taskColumns + ` FROM {{schema}}.tasks t` + whereClause(where) +
		fmt.Sprintf(` ORDER BY t.id DESC LIMIT %d`, limit)
	if text != "" {
		sql = `SELECT ` + taskColumns + ` FROM (SELECT * FROM {{schema}}.tasks t` + whereClause(where) +
			fmt.Sprintf(` ORDER BY t.id DESC LIMIT %d) t WHERE %s ORDER BY t.id DESC LIMIT %d`, TextScanCap, text, limit)
	}
	rows, err := p.query(ctx, p.sql(sql), args...)
	if err != nil {
		return nil, fmt.Errorf("find tasks: %w", mapErr(err))
	}
	ts, err := pgx.CollectRows(rows, scanTask)
	if err != nil {
		return nil, fmt.Errorf("find tasks: %w", mapErr(err))
	}
	return ts, nil
}

// CountTasks counts the tasks q selects (ignoring q.Before and q.Limit)
// whose state is one of states (any when empty). Past CountCap rows, or
// past q.CountBudget (CountBudget when zero) of counting, it returns the
// planner's estimate, marked Estimated; with q.Text it counts within the
// TextScanCap newest tasks, as FindTasks searches.
func (p *Provider) CountTasks(ctx context.Context, q lease.TaskQuery, states ...lease.TaskState) (lease.Count, error) {
	budget := q.CountBudget
	if budget <= 0 {
		budget = CountBudget
	}
	q.Before, q.Limit = 0, 0
	where, text, args := taskWhere(q, states, nil)
	from := `{{schema}}.tasks t` + whereClause(where)
	sql := fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM %s LIMIT %d) c`, from, CountCap+1)
	if text != "" {
		sql = fmt.Sprintf(`SELECT count(*) FROM (SELECT t.payload_text FROM %s ORDER BY t.id DESC LIMIT %d) t WHERE %s`,
			from, TextScanCap, text)
	}
	n, err := p.countWithin(ctx, budget, p.sql(sql), args...)
	switch {
	case errors.Is(err, errOverBudget):
	case err != nil:
		return lease.Count{}, fmt.Errorf("count tasks: %w", err)
	case n <= CountCap || text != "":
		return lease.Count{N: n}, nil
	}
	est, err := p.estimate(ctx, `SELECT 1 FROM `+from, args...)
	if err != nil {
		return lease.Count{}, fmt.Errorf("count tasks: %w", err)
	}
	return lease.Count{N: max(est, n), Estimated: true}, nil
}

// errOverBudget: a count ran out of its time.
var errOverBudget = errors.New("count over budget")

// countWithin runs the count sql under a statement timeout of budget (and
// without JIT, whose compiling costs more than these counts), returning
// errOverBudget when it runs out.
func (p *Provider) countWithin(ctx context.Context, budget time.Duration, sql string, args ...any) (int64, error) {
	tx, err := p.beginTx(ctx, p.reads)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only
	if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL statement_timeout = %d; SET LOCAL jit = off`, max(budget.Milliseconds(), 1))); err != nil {
		return 0, mapErr(err)
	}
	var n int64
	err = tx.QueryRow(ctx, sql, args...).Scan(&n)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "57014" { // query_canceled: the timeout
		return 0, errOverBudget
	}
	return n, mapErr(err)
}

// estimate returns the planner's estimate of the rows sql returns.
func (p *Provider) estimate(ctx context.Context, sql string, args ...any) (int64, error) {
	var plan []byte
	if err := p.reads.QueryRow(ctx, p.sql(`EXPLAIN (FORMAT JSON) `+sql), args...).Scan(&plan); err != nil {
		return 0, fmt.Errorf("estimate: %w", mapErr(err))
	}
	var out []struct {
		Plan struct {
			Rows float64 `json:"Plan Rows"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(plan, &out); err != nil || len(out) == 0 {
		return 0, fmt.Errorf("estimate: read plan: %v", err)
	}
	return int64(out[0].Plan.Rows), nil
}

// BulkRetry queues again, with fresh attempts, every failed or cancelled
// task q selects (ignoring q.Before and q.Limit), in batches. A task whose
// dedupe key an unfinished task holds stays as it is. It returns how many
// it queued.
func (p *Provider) BulkRetry(ctx context.Context, q lease.TaskQuery) (int64, error) {
	return p.bulk(ctx, q, []lease.TaskState{lease.TaskFailed, lease.TaskCancelled}, `
		UPDATE {{schema}}.tasks t SET state = 'queued', attempts = 0, cancel_requested = false,
			run_after = clock_timestamp(), finished_at = NULL, updated_at = clock_timestamp()
		FROM s WHERE t.id = s.id AND t.state IN ('failed', 'cancelled') AND t.dedupe_key IS NULL`,
		func(ctx context.Context, id int64) error { return p.retry(ctx, p.readTx, id) })
}

// BulkCancel cancels every queued task q selects at once and marks every
// running one for its holder, as Cancel does, in batches. It returns how
// many it cancelled or marked.
func (p *Provider) BulkCancel(ctx context.Context, q lease.TaskQuery) (int64, error) {
	return p.bulk(ctx, q, []lease.TaskState{lease.TaskQueued, lease.TaskRunning}, `
		UPDATE {{schema}}.tasks t SET
			state = CASE WHEN t.state = 'queued' THEN 'cancelled' ELSE t.state END,
			cancel_requested = true,
			finished_at = CASE WHEN t.state = 'queued' THEN clock_timestamp() ELSE t.finished_at END,
			updated_at = clock_timestamp()
		FROM s WHERE t.id = s.id AND t.state IN ('queued', 'running') AND NOT t.cancel_requested`, nil)
}

// bulk runs update, which reads the batch's ids from s, over the tasks q
// and states select, oldest first, a batch per statement. Tasks the update
// leaves out because of their dedupe key go one by one through single.
func (p *Provider) bulk(ctx context.Context, q lease.TaskQuery, states []lease.TaskState, update string,
	single func(context.Context, int64) error) (int64, error) {
	q.Before, q.Limit = 0, 0
	var total int64
	var after int64
	for {
		where, text, args := taskWhere(q, states, []any{after})
		where = append(where, "t.id > $1")
		if text != "" {
			where = append(where, text)
		}
		sql := `WITH s AS (SELECT t.id, t.dedupe_key FROM {{schema}}.tasks t` + whereClause(where) +
			fmt.Sprintf(` ORDER BY t.id LIMIT %d), u AS (`, bulkBatch) + update + ` RETURNING t.id)
			SELECT coalesce((SELECT max(id) FROM s), 0), (SELECT count(*) FROM u),
				coalesce((SELECT array_agg(s.id) FROM s WHERE s.dedupe_key IS NOT NULL), '{}')`
		var last, n int64
		var keyed []int64
		if err := p.reads.QueryRow(ctx, p.sql(sql), args...).Scan(&last, &n, &keyed); err != nil {
			return total, fmt.Errorf("bulk change of tasks: %w", mapErr(err))
		}
		total += n
		if single != nil {
			for _, id := range keyed {
				if err := single(ctx, id); err == nil {
					total++
				}
			}
		}
		if last == 0 {
			return total, nil
		}
		after = last
	}
}

// LiveRuns lists the running runs, oldest first, through
// runs_running_lane_idx.
func (p *Provider) LiveRuns(ctx context.Context) ([]lease.Run, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+runColumns+` FROM {{schema}}.runs r
		JOIN {{schema}}.tasks t ON t.id = r.task_id
		WHERE r.state = 'running' AND r.lane IS NOT NULL ORDER BY r.id`))
	if err != nil {
		return nil, fmt.Errorf("list live runs: %w", mapErr(err))
	}
	rs, err := pgx.CollectRows(rows, scanRun)
	if err != nil {
		return nil, fmt.Errorf("list live runs: %w", mapErr(err))
	}
	return rs, nil
}

// spanColumns are what a timeline bar needs of a run.
const spanColumns = `r.id, r.task_id, r.lane, r.agent, r.attempt, r.owner, r.state, r.started_at, r.finished_at,
	coalesce(r.summary, ''), r.exit_code, coalesce(r.signal, '')`

// scanSpan reads a row of spanColumns.
func scanSpan(row pgx.CollectableRow) (lease.Run, error) {
	var r lease.Run
	var finished *time.Time
	err := row.Scan(&r.ID, &r.TaskID, &r.Lane, &r.Agent, &r.Attempt, &r.Owner, &r.State, &r.StartedAt, &finished,
		&r.Summary, &r.ExitCode, &r.Signal)
	if finished != nil {
		r.FinishedAt = *finished
	}
	return r, err
}

// RunsBetween lists the runs that overlap [from, to): at most limit of
// those that started in it (the latest), those that started before and
// ended in it or still run. It also counts the runs that started in it.
func (p *Provider) RunsBetween(ctx context.Context, from, to time.Time, limit int) ([]lease.Run, lease.Count, error) {
	sql := `(SELECT ` + spanColumns + ` FROM {{schema}}.runs r WHERE r.started_at >= $1 AND r.started_at < $2
			ORDER BY r.started_at DESC LIMIT $3)
		UNION ALL
		(SELECT ` + spanColumns + ` FROM {{schema}}.runs r WHERE r.finished_at IS NOT NULL AND r.finished_at >= $1
			AND r.started_at < $1 ORDER BY r.finished_at LIMIT $3)
		UNION ALL
		(SELECT ` + spanColumns + ` FROM {{schema}}.runs r WHERE r.state = 'running' AND r.lane IS NOT NULL
			AND r.started_at < $1)`
	rows, err := p.query(ctx, p.sql(sql), from, to, limit)
	if err != nil {
		return nil, lease.Count{}, fmt.Errorf("list runs between %s and %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), mapErr(err))
	}
	rs, err := pgx.CollectRows(rows, scanSpan)
	if err != nil {
		return nil, lease.Count{}, fmt.Errorf("list runs between: %w", mapErr(err))
	}
	count := `{{schema}}.runs r WHERE r.started_at >= $1 AND r.started_at < $2`
	var n int64
	if err := p.reads.QueryRow(ctx, p.sql(fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM %s LIMIT %d) c`, count, CountCap+1)),
		from, to).Scan(&n); err != nil {
		return nil, lease.Count{}, fmt.Errorf("count runs: %w", mapErr(err))
	}
	if n <= CountCap {
		return rs, lease.Count{N: n}, nil
	}
	est, err := p.estimate(ctx, `SELECT 1 FROM `+count, from, to)
	if err != nil {
		return nil, lease.Count{}, err
	}
	return rs, lease.Count{N: max(est, n), Estimated: true}, nil
}

// Throughput buckets [from, to) by every: the runs finished in each bucket
// by outcome, and the percentiles of the queue wait of the runs started in
// it (the wait of a task's latest attempt, from its run_after).
func (p *Provider) Throughput(ctx context.Context, from, to time.Time, every time.Duration) ([]lease.Bucket, error) {
	if every <= 0 {
		return nil, fmt.Errorf("throughput: %w: bucket %s is not positive", lease.ErrInvalid, every)
	}
	n := int(to.Sub(from) / every)
	if n <= 0 || n > 20_000 {
		return nil, fmt.Errorf("throughput: %w: %d buckets of %s", lease.ErrInvalid, n, every)
	}
	out := make([]lease.Bucket, n)
	for i := range out {
		out[i] = lease.Bucket{At: from.Add(time.Duration(i) * every), Finished: map[lease.RunState]int64{}}
	}
	index := func(at time.Time) int {
		i := int(at.Sub(from) / every)
		if i < 0 || i >= n {
			return -1
		}
		return i
	}
	// The sample of the waits is sized by the planner's estimate of the
	// runs started, so that the two reads can go at once.
	started, err := p.estimate(ctx, `SELECT 1 FROM {{schema}}.runs r WHERE r.started_at >= $1 AND r.started_at < $2`, from, to)
	if err != nil {
		return nil, fmt.Errorf("throughput: %w", err)
	}
	k := max(1, (started+WaitSample-1)/WaitSample)
	var finishedErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		finishedErr = p.finishedBuckets(ctx, from, to, every, out, index)
		if finishedErr == nil {
			finishedErr = p.usageBuckets(ctx, from, to, every, out, index)
		}
	}()
	waitErr := p.waitBuckets(ctx, from, to, every, k, out, index)
	<-done
	if err := errors.Join(finishedErr, waitErr); err != nil {
		return nil, err
	}
	for i := range out {
		out[i].WaitSample = k
	}
	return out, nil
}

// finishedBuckets counts the runs finished in each bucket by outcome, from
// runs_finished_at_idx alone. It writes only the Finished maps of out.
func (p *Provider) finishedBuckets(ctx context.Context, from, to time.Time, every time.Duration, out []lease.Bucket, index func(time.Time) int) error {
	rows, err := p.query(ctx, p.sql(`SELECT date_bin($3::interval, r.finished_at, $1), r.state, count(*)
		FROM {{schema}}.runs r WHERE r.finished_at IS NOT NULL AND r.finished_at >= $1 AND r.finished_at < $2
		GROUP BY 1, 2`), from, to, every)
	if err != nil {
		return fmt.Errorf("throughput: %w", mapErr(err))
	}
	var at time.Time
	var state string
	var c int64
	_, err = pgx.ForEachRow(rows, []any{&at, &state, &c}, func() error {
		if i := index(at); i >= 0 {
			out[i].Finished[lease.RunState(state)] += c
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("throughput: %w", mapErr(err))
	}
	return nil
}

// usageBuckets sums the usage the runs finished in each bucket reported,
// by agent, through runs_finished_at_idx as finishedBuckets does. It
// writes only the Usage maps of out.
func (p *Provider) usageBuckets(ctx context.Context, from, to time.Time, every time.Duration, out []lease.Bucket, index func(time.Time) int) error {
	rows, err := p.query(ctx, p.sql(`SELECT date_bin($3::interval, r.finished_at, $1), r.agent, sum(r.usage)::float8
		FROM {{schema}}.runs r WHERE r.finished_at IS NOT NULL AND r.finished_at >= $1 AND r.finished_at < $2
		  AND r.usage IS NOT NULL
		GROUP BY 1, 2`), from, to, every)
	if err != nil {
		return fmt.Errorf("usage: %w", mapErr(err))
	}
	var at time.Time
	var agent string
	var sum float64
	_, err = pgx.ForEachRow(rows, []any{&at, &agent, &sum}, func() error {
		if i := index(at); i >= 0 {
			if out[i].Usage == nil {
				out[i].Usage = map[string]float64{}
			}
			out[i].Usage[agent] += sum
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("usage: %w", mapErr(err))
	}
	return nil
}

// waitBuckets reads the queue wait percentiles of 1 in k of the runs
// started in each bucket (by task id). It writes only the Started and Wait
// fields of out.
func (p *Provider) waitBuckets(ctx context.Context, from, to time.Time, every time.Duration, k int64, out []lease.Bucket, index func(time.Time) int) error {
	rows, err := p.query(ctx, p.sql(`SELECT date_bin($3::interval, r.started_at, $1), count(*),
			percentile_cont(ARRAY[0.5, 0.9, 0.99]) WITHIN GROUP (ORDER BY greatest(0, extract(epoch FROM r.started_at - t.run_after)))
		FROM {{schema}}.runs r JOIN {{schema}}.tasks t ON t.id = r.task_id AND r.attempt = t.attempts
		WHERE r.started_at >= $1 AND r.started_at < $2 AND r.task_id % $4 = 0 GROUP BY 1`), from, to, every, k)
	if err != nil {
		return fmt.Errorf("queue wait: %w", mapErr(err))
	}
	var at time.Time
	var c int64
	var ps []float64
	_, err = pgx.ForEachRow(rows, []any{&at, &c, &ps}, func() error {
		if i := index(at); i >= 0 && len(ps) == 3 {
			out[i].Started, out[i].WaitP50, out[i].WaitP90, out[i].WaitP99 = c*k, ps[0], ps[1], ps[2]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("queue wait: %w", mapErr(err))
	}
	return nil
}

// LastOutcomes returns, for each of agents that has one, its latest run
// that ended, through runs_agent_id_idx.
func (p *Provider) LastOutcomes(ctx context.Context, agents []string) ([]lease.Run, error) {
	rows, err := p.query(ctx, p.sql(`SELECT r.* FROM unnest($1::text[]) a (name)
		CROSS JOIN LATERAL (SELECT `+spanColumns+` FROM {{schema}}.runs r
			WHERE r.agent = a.name AND r.state <> 'running' ORDER BY r.id DESC LIMIT 1) r
		ORDER BY r.agent`), nonNil(agents))
	if err != nil {
		return nil, fmt.Errorf("read last outcomes: %w", mapErr(err))
	}
	rs, err := pgx.CollectRows(rows, scanSpan)
	if err != nil {
		return nil, fmt.Errorf("read last outcomes: %w", mapErr(err))
	}
	return rs, nil
}

// PeriodicRecords lists the last tick of every periodic schedule recorded
// in the queue.
func (p *Provider) PeriodicRecords(ctx context.Context) ([]lease.PeriodicRecord, error) {
	rows, err := p.query(ctx, p.sql(`SELECT name, last_tick FROM {{schema}}.periodic ORDER BY name`))
	if err != nil {
		return nil, fmt.Errorf("read periodic ticks: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lease.PeriodicRecord, error) {
		var r lease.PeriodicRecord
		var last *time.Time
		err := row.Scan(&r.Name, &last)
		if last != nil {
			r.LastTick = *last
		}
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("read periodic ticks: %w", mapErr(err))
	}
	return out, nil
}
