-- enqueue adds a task, or returns the unfinished (waiting, queued or
-- running) task with the same dedupe key (existed = true) and writes
-- nothing. Each statement sees what committed before it started, so a
-- racing enqueue of the same key is found on the next turn of the loop. p_parent_run is the run that enqueued it,
-- or NULL.
CREATE OR REPLACE FUNCTION {{schema}}.enqueue(
    p_lane text, p_agent text, p_payload text, p_priority int, p_run_after timestamptz,
    p_delay interval, p_max_attempts int, p_key text, p_parent_run bigint, OUT id bigint, OUT existed boolean)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. 100 LOOP
        IF p_key IS NOT NULL THEN
            SELECT t.id INTO id FROM {{schema}}.tasks t
            WHERE t.dedupe_key = p_key AND t.state IN ('waiting', 'queued', 'running');
            IF FOUND THEN
                existed := true;
                RETURN;
            END IF;
        END IF;
        INSERT INTO {{schema}}.lanes (name) VALUES (p_lane) ON CONFLICT DO NOTHING;
        INSERT INTO {{schema}}.tasks AS t (lane, agent, payload, payload_text, priority, run_after,
                                      max_attempts, state, dedupe_key, parent_run)
        VALUES (p_lane, p_agent, p_payload::jsonb, p_payload, p_priority,
                coalesce(p_run_after, clock_timestamp() + coalesce(p_delay, interval '0')),
                p_max_attempts, 'queued', p_key, p_parent_run)
        ON CONFLICT (dedupe_key) WHERE state IN ('waiting', 'queued', 'running') AND dedupe_key IS NOT NULL DO NOTHING
        RETURNING t.id INTO id;
        IF FOUND THEN
            existed := false;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'enqueue: dedupe key % kept changing hands', p_key
        USING ERRCODE = 'serialization_failure';
END $$;
