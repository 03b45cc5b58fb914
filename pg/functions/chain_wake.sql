-- chain_wake decides, of the tasks p_tasks, those that wait: queued once
-- every task they wait for is done (with after_any: has finished, however
-- it ended), cancelled at once when one of them failed for good or was
-- cancelled (not with after_any), their summary naming it and
-- cancelled_by recording it; and so on down the chain, for the tasks that
-- wait for the ones it cancelled. The others keep waiting.
--
-- The waiting tasks are locked first, in id order, and read after the
-- lock in a statement of their own: its snapshot sees every parent that
-- finished before the lock was granted. Two parents of one task that
-- finish in two transactions at once thus both see the task, one after
-- the other, and the second sees the first done. A task waits only for
-- older tasks, so the chain's locks are taken in id order, down it.
CREATE OR REPLACE FUNCTION {{schema}}.chain_wake(p_tasks bigint[]) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_tasks     bigint[] := p_tasks;
    v_locked    bigint[];
    v_cancelled bigint[];
BEGIN
    LOOP
        v_locked := ARRAY(SELECT t.id FROM {{schema}}.tasks t
                          WHERE t.id = ANY (v_tasks) AND t.state = 'waiting' ORDER BY t.id FOR UPDATE);
        EXIT WHEN v_locked = '{}';
        WITH verdict AS (
            SELECT t.id, t.after_any, b.id AS blocker, b.state AS blocker_state,
                   coalesce(bool_and(p.state = 'done'), true) AS all_done,
                   coalesce(bool_and(p.state IN ('done', 'failed', 'cancelled')), true) AS all_finished
            FROM {{schema}}.tasks t
            LEFT JOIN {{schema}}.task_deps d ON d.task_id = t.id
            LEFT JOIN {{schema}}.tasks p ON p.id = d.parent_id
            LEFT JOIN LATERAL (
                SELECT x.id, x.state FROM {{schema}}.task_deps y JOIN {{schema}}.tasks x ON x.id = y.parent_id
                WHERE y.task_id = t.id AND x.state IN ('failed', 'cancelled') AND NOT t.after_any
                ORDER BY x.id LIMIT 1) b ON true
            WHERE t.id = ANY (v_locked)
            GROUP BY t.id, t.after_any, b.id, b.state
        ), moved AS (
            UPDATE {{schema}}.tasks t SET
                state = CASE WHEN v.blocker IS NOT NULL THEN 'cancelled' ELSE 'queued' END,
                summary = CASE WHEN v.blocker IS NOT NULL
                               THEN 'cancelled: task ' || v.blocker || ', which it waited for, '
                                    || CASE WHEN v.blocker_state = 'failed' THEN 'failed' ELSE 'was cancelled' END
                          END,
                cancelled_by = v.blocker,
                run_after = CASE WHEN v.blocker IS NULL THEN greatest(t.run_after, clock_timestamp())
                                 ELSE t.run_after END,
                finished_at = CASE WHEN v.blocker IS NOT NULL THEN clock_timestamp() END,
                updated_at = clock_timestamp()
            FROM verdict v
            WHERE t.id = v.id
              AND (v.blocker IS NOT NULL OR (v.all_done AND NOT v.after_any) OR (v.all_finished AND v.after_any))
            RETURNING t.id, t.state
        )
        SELECT array_agg(m.id) FILTER (WHERE m.state = 'cancelled') INTO v_cancelled FROM moved m;
        EXIT WHEN v_cancelled IS NULL;
        v_tasks := ARRAY(SELECT DISTINCT d.task_id FROM {{schema}}.task_deps d WHERE d.parent_id = ANY (v_cancelled));
    END LOOP;
END $$;
