-- heartbeat extends the leases of live runs, all in one statement. A run
-- whose lease has expired is lost even before it is reaped, and so is one
-- made by another claim than the beat's token says (its id was given out
-- again by a database that lost the run: a failover to a copy behind); a
-- NULL token is not checked. Only unindexed columns of runs change, so the
-- updates are HOT.
CREATE OR REPLACE FUNCTION {{schema}}.heartbeat(p_ids bigint[], p_lease interval[], p_pids int[], p_output timestamptz[], p_tokens text[])
RETURNS TABLE (run_id bigint, lease_expires_at timestamptz, cancel_requested boolean)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH b AS (
        SELECT * FROM unnest(p_ids, p_lease, p_pids, p_output, p_tokens) AS b(id, lease, pid, output, token)
    ), u AS (
        UPDATE {{schema}}.runs r SET
            lease_expires_at = clock_timestamp() + b.lease,
            last_heartbeat_at = clock_timestamp(),
            pid = coalesce(b.pid, r.pid),
            last_output_at = coalesce(b.output, r.last_output_at)
        FROM b
        WHERE r.id = b.id AND r.state = 'running' AND r.lease_expires_at > clock_timestamp()
          AND (b.token IS NULL OR r.claim_token IS NOT DISTINCT FROM b.token)
        RETURNING r.id, r.task_id, r.lease_expires_at
    )
    SELECT u.id, u.lease_expires_at, t.cancel_requested
    FROM u JOIN {{schema}}.tasks t ON t.id = u.task_id;
END $$;
