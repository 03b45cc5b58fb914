-- enqueue_after is enqueue for a task that waits for the tasks p_after
-- (at most 1,000, checked by the caller, which also sorts them): it
-- enqueues the task, then holds every one of them FOR SHARE, in id order,
-- so that none finishes before this commits (their finish then sees this
-- task waiting) and reads their states under that lock. A task named that
-- does not exist, or the new task itself, is refused with invalid
-- parameter value, and the transaction writes nothing. A task with the
-- dedupe key of an unfinished one is that one, as with enqueue. The new
-- task is waiting, or at once queued or cancelled (chain_wake).
CREATE OR REPLACE FUNCTION {{schema}}.enqueue_after(
    p_lane text, p_agent text, p_payload text, p_priority int, p_run_after timestamptz,
    p_delay interval, p_max_attempts int, p_key text, p_parent_run bigint, p_after bigint[], p_any boolean,
    OUT id bigint, OUT existed boolean)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_id      bigint;
    v_found   bigint[];
    v_missing bigint;
BEGIN
    SELECT e.id, e.existed INTO id, existed
    FROM {{schema}}.enqueue(p_lane, p_agent, p_payload, p_priority, p_run_after, p_delay, p_max_attempts,
                            p_key, p_parent_run) e;
    IF existed THEN
        RETURN;
    END IF;
    v_id := id;
    IF v_id = ANY (p_after) THEN
        RAISE EXCEPTION 'after: task % is the task being enqueued; a task cannot wait for itself', v_id
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_found := ARRAY(SELECT t.id FROM {{schema}}.tasks t WHERE t.id = ANY (p_after) ORDER BY t.id FOR SHARE);
    SELECT min(a) INTO v_missing FROM unnest(p_after) a WHERE a <> ALL (v_found);
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'after: task % does not exist; a task may wait only for tasks already enqueued', v_missing
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    INSERT INTO {{schema}}.task_deps (task_id, parent_id) SELECT v_id, f FROM unnest(v_found) f;
    UPDATE {{schema}}.tasks t SET state = 'waiting', after_any = coalesce(p_any, false) WHERE t.id = v_id;
    PERFORM {{schema}}.chain_wake(ARRAY[v_id]);
END $$;
