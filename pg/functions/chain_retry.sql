-- chain_retry queues the failed or cancelled task p_task again with fresh
-- attempts and, with p_chain, the tasks its end cancelled (cancelled_by),
-- and theirs in turn. A retried task that waits for others waits again
-- (chain_wake decides it at once: queued, waiting, or cancelled again by
-- another task it waits for that failed). It returns the tasks it
-- retried, p_task first, with their states and summaries after (the
-- caller's own statement reads the tasks as they were); none when p_task is
-- not failed or cancelled.
CREATE OR REPLACE FUNCTION {{schema}}.chain_retry(p_task bigint, p_chain boolean)
RETURNS TABLE (id bigint, lane text, agent text, state text, summary text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[];
BEGIN
    PERFORM 1 FROM {{schema}}.tasks t WHERE t.id = p_task AND t.state IN ('failed', 'cancelled') FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF p_chain THEN
        v_ids := ARRAY(
            WITH RECURSIVE c(id) AS (
                SELECT p_task
                UNION
                SELECT t.id FROM {{schema}}.tasks t JOIN c ON t.cancelled_by = c.id
                WHERE t.state = 'cancelled')
            SELECT c.id FROM c ORDER BY c.id);
        PERFORM 1 FROM {{schema}}.tasks t WHERE t.id = ANY (v_ids) ORDER BY t.id FOR UPDATE;
    ELSE
        v_ids := ARRAY[p_task];
    END IF;
    UPDATE {{schema}}.tasks t SET
        state = CASE WHEN EXISTS (SELECT 1 FROM {{schema}}.task_deps d WHERE d.task_id = t.id)
                     THEN 'waiting' ELSE 'queued' END,
        attempts = 0, cancel_requested = false, summary = NULL, cancelled_by = NULL,
        run_after = clock_timestamp(), finished_at = NULL, updated_at = clock_timestamp()
    WHERE t.id = ANY (v_ids) AND t.state IN ('failed', 'cancelled');
    PERFORM {{schema}}.chain_wake(v_ids);
    RETURN QUERY
    SELECT t.id, t.lane, t.agent, t.state,
           coalesce(t.summary, (SELECT r.summary FROM {{schema}}.runs r WHERE r.task_id = t.id ORDER BY r.id DESC LIMIT 1), '')
    FROM {{schema}}.tasks t WHERE t.id = ANY (v_ids)
    ORDER BY t.id <> p_task, t.id;
END $$;
