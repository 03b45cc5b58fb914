-- abandon_owner abandons the running runs of p_owner held by one of
-- p_instances, and frees or fails their tasks as a reap would.
CREATE OR REPLACE FUNCTION {{schema}}.abandon_owner(p_owner text, p_instances text[], p_summary text)
RETURNS SETOF bigint LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        UPDATE {{schema}}.runs x SET state = 'abandoned', finished_at = clock_timestamp(), summary = p_summary
        WHERE x.owner = p_owner AND x.state = 'running' AND x.instance = ANY (p_instances)
        RETURNING x.id, x.task_id
    LOOP
        PERFORM {{schema}}.finish_task(r.task_id, 'abandoned', NULL, false);
        RETURN NEXT r.id;
    END LOOP;
END $$;
