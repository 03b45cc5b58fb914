-- chain_revive brings back what the failure of the tasks p_tasks
-- cancelled (cancelled_by, and theirs in turn), now that a late
-- completion made them done: waiting again, then woken (chain_wake),
-- and wakes what else waits for them (chain_release). settle_runs calls
-- it for the late completions of reaped runs; a task that failed for good
-- and is then retried brings its chain back only when asked (chain_retry).
CREATE OR REPLACE FUNCTION {{schema}}.chain_revive(p_tasks bigint[]) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_ids bigint[];
BEGIN
    v_ids := ARRAY(
        WITH RECURSIVE c(id) AS (
            SELECT t.id FROM {{schema}}.tasks t WHERE t.cancelled_by = ANY (p_tasks) AND t.state = 'cancelled'
            UNION
            SELECT t.id FROM {{schema}}.tasks t JOIN c ON t.cancelled_by = c.id WHERE t.state = 'cancelled')
        SELECT t.id FROM {{schema}}.tasks t WHERE t.id IN (SELECT c.id FROM c) ORDER BY t.id FOR UPDATE);
    IF v_ids <> '{}' THEN
        UPDATE {{schema}}.tasks t SET state = 'waiting', summary = NULL, cancelled_by = NULL, cancel_requested = false,
            finished_at = NULL, updated_at = clock_timestamp()
        WHERE t.id = ANY (v_ids) AND t.state = 'cancelled';
        PERFORM {{schema}}.chain_wake(v_ids);
    END IF;
    PERFORM {{schema}}.chain_release(p_tasks);
END $$;
