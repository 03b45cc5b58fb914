-- chain_cancel cancels every task waiting for p_task, directly or through
-- others, whatever they wait for, their summary naming p_task's chain and
-- cancelled_by p_task (so that a retry of its chain brings them back),
-- and returns them. The caller then cancels p_task itself as a cancel
-- does, in the same transaction.
CREATE OR REPLACE FUNCTION {{schema}}.chain_cancel(p_task bigint)
RETURNS TABLE (id bigint)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_ids bigint[];
BEGIN
    v_ids := ARRAY(
        WITH RECURSIVE c(id) AS (
            SELECT d.task_id FROM {{schema}}.task_deps d WHERE d.parent_id = p_task
            UNION
            SELECT d.task_id FROM {{schema}}.task_deps d JOIN c ON d.parent_id = c.id)
        SELECT t.id FROM {{schema}}.tasks t WHERE t.id IN (SELECT c.id FROM c) AND t.state = 'waiting'
        ORDER BY t.id FOR UPDATE);
    RETURN QUERY
    UPDATE {{schema}}.tasks t SET state = 'cancelled', cancelled_by = p_task,
        summary = 'cancelled: with the chain of task ' || p_task,
        finished_at = clock_timestamp(), updated_at = clock_timestamp()
    WHERE t.id = ANY (v_ids) AND t.state = 'waiting'
    RETURNING t.id;
END $$;
