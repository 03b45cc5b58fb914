-- abandon_owner abandons the running runs of p_owner held by one of
-- p_instances, and frees or fails their tasks as a reap would.
CREATE OR REPLACE FUNCTION {{schema}}.abandon_owner(p_owner text, p_instances text[], p_summary text)
RETURNS SETOF bigint LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_runs  bigint[];
    v_tasks bigint[];
BEGIN
    WITH ended AS (
        UPDATE {{schema}}.runs x SET state = 'abandoned', finished_at = clock_timestamp(), summary = p_summary
        WHERE x.owner = p_owner AND x.state = 'running' AND x.instance = ANY (p_instances)
        RETURNING x.id, x.task_id
    )
    SELECT array_agg(e.id ORDER BY e.id), array_agg(e.task_id ORDER BY e.id) INTO v_runs, v_tasks FROM ended e;
    IF v_runs IS NULL THEN
        RETURN;
    END IF;
    PERFORM {{schema}}.finish_tasks(v_runs, v_tasks, array_fill('abandoned'::text, ARRAY[cardinality(v_tasks)]), NULL, NULL);
    RETURN QUERY SELECT unnest(v_runs);
END $$;
