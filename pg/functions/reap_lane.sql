-- reap_lane abandons the expired runs of one lane and moves their tasks.
-- The caller holds the lane lock. It first asks, through the live-runs-by-
-- lane index, whether any run of the lane expired, and writes only when one
-- did, so it costs O(lane limit). The summary it writes is the text of
-- lease.SilenceSummary.
CREATE OR REPLACE FUNCTION {{schema}}.reap_lane(p_lane text) RETURNS int
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_runs  bigint[];
    v_tasks bigint[];
BEGIN
    IF NOT EXISTS (SELECT 1 FROM {{schema}}.runs x
                   WHERE x.lane = p_lane AND x.state = 'running' AND x.lease_expires_at <= clock_timestamp()) THEN
        RETURN 0;
    END IF;
    WITH reaped AS (
        UPDATE {{schema}}.runs x SET
            state = 'abandoned',
            finished_at = clock_timestamp(),
            summary = 'lease expired: silent for '
                || round(extract(epoch FROM clock_timestamp() - x.last_heartbeat_at))::bigint || 's'
        WHERE x.lane = p_lane AND x.state = 'running' AND x.lease_expires_at <= clock_timestamp()
        RETURNING x.id, x.task_id
    )
    SELECT array_agg(e.id), array_agg(e.task_id) INTO v_runs, v_tasks FROM reaped e;
    IF v_tasks IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM {{schema}}.finish_tasks(v_runs, v_tasks, array_fill('abandoned'::text, ARRAY[cardinality(v_tasks)]), NULL, NULL);
    RETURN cardinality(v_tasks);
END $$;
