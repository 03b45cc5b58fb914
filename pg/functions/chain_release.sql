-- chain_release wakes (chain_wake) what waits for the tasks p_parents,
-- which just reached a final state, in the transaction that finished
-- them: finish_tasks calls it, and so do a cancel and a late completion.
-- The lookup is a new statement, so it sees the dependents of every
-- enqueue that committed while the caller waited for a parent's row (an
-- enqueue holds its parents FOR SHARE until it commits). A task that no
-- task waits for costs one probe of task_deps_parent_idx.
CREATE OR REPLACE FUNCTION {{schema}}.chain_release(p_parents bigint[]) RETURNS void
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_waiting bigint[];
BEGIN
    v_waiting := ARRAY(SELECT DISTINCT d.task_id FROM {{schema}}.task_deps d WHERE d.parent_id = ANY (p_parents));
    IF v_waiting <> '{}' THEN
        PERFORM {{schema}}.chain_wake(v_waiting);
    END IF;
END $$;
