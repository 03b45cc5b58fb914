-- finish_tasks moves the tasks of runs that just ended, the i-th task (of
-- the i-th run) by the i-th outcome, in one statement. A cancel request
-- wins over a retry; a failed attempt waits retry_in (or the backoff); an
-- abandoned one waits retry_in when given (a timeout or a stall: the
-- agent's own doing), else is claimable at once; refund gives the attempt
-- back. A task that reaches a final state keeps its run_after (it runs
-- no more) and gets its finished_at in the same write: every write of a
-- task row here is a new row version with an entry in each of its
-- indexes, so it is written once. Only running tasks move.
-- A task that fails for good records the 'failed' event of its run in
-- events, the outbox notifications are made from, in the same statement:
-- this is the one place tasks become failed, so none fails untold. The
-- tasks waiting for those that reached a final state are woken
-- (chain_release) in the same transaction.
-- plpgsql, not sql: a sql function's statement is parsed and planned again
-- at every call, a plpgsql one once per session (generic, for the reason
-- settle gives). The tasks are found by id = ANY, never by a join: a
-- join's generic plan, on statistics taken when few tasks ran, read every
-- running task.
CREATE OR REPLACE FUNCTION {{schema}}.finish_tasks(p_runs bigint[], p_tasks bigint[], p_outcomes text[],
                                                   p_retry_in interval[], p_refunds boolean[])
RETURNS void LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
DECLARE
    v_final bigint[];
BEGIN
    WITH moved AS (
        UPDATE {{schema}}.tasks t SET (attempts, state, run_after, updated_at, finished_at) = (
            SELECT a.attempts, n.state,
                   CASE WHEN n.state <> 'queued' THEN t.run_after
                        WHEN x.outcome = 'failed'
                            THEN a.now + coalesce(x.retry_in, {{schema}}.backoff(t.attempts, interval '10 seconds'))
                        WHEN x.outcome = 'abandoned' THEN a.now + coalesce(x.retry_in, interval '0')
                        ELSE t.run_after END,
                   a.now,
                   CASE WHEN n.state = 'queued' THEN t.finished_at ELSE coalesce(t.finished_at, a.now) END
            FROM (SELECT array_position(p_tasks, t.id) AS k) i
            CROSS JOIN LATERAL (
                SELECT p_outcomes[i.k] AS outcome, p_retry_in[i.k] AS retry_in,
                       coalesce(p_refunds[i.k], false) AND p_outcomes[i.k] = 'abandoned' AS refund) x
            CROSS JOIN LATERAL (
                SELECT CASE WHEN x.refund AND t.attempts > 0 THEN t.attempts - 1 ELSE t.attempts END AS attempts,
                       clock_timestamp() AS now) a
            CROSS JOIN LATERAL (
                SELECT CASE WHEN x.outcome = 'completed' THEN 'done'
                            WHEN x.outcome = 'cancelled' OR t.cancel_requested THEN 'cancelled'
                            WHEN a.attempts < t.max_attempts THEN 'queued'
                            ELSE 'failed' END AS state) n)
        WHERE t.id = ANY (p_tasks) AND (t.state = 'running') IS TRUE
        RETURNING t.id, t.state, t.agent
    ), told AS (
        INSERT INTO {{schema}}.events (task_id, run_id, event, agent)
        SELECT m.id, p_runs[array_position(p_tasks, m.id)], 'failed', m.agent
        FROM moved m WHERE m.state = 'failed'
        ON CONFLICT (run_id, event) DO NOTHING
    )
    SELECT array_agg(m.id) INTO v_final FROM moved m WHERE m.state IN ('done', 'failed', 'cancelled');
    -- What waits for the tasks that ended, in this transaction.
    IF v_final IS NOT NULL THEN
        PERFORM {{schema}}.chain_release(v_final);
    END IF;
END $$;
