-- claim_named returns the lanes of p_lanes a claim should try, best task
-- first: the unpaused lanes with work (a queued task that is due, or the
-- task of an expired run, which the claim reaps) and room under their
-- limit, at most p_reach of them; NULL when none has both. The best task
-- of each lane is read through the lanes key and an index of the lane's
-- tasks, so the cost grows with p_lanes, not with the queue. claim_any
-- asks it about every unpaused lane when the head of the queue falls short.
--
-- JIT is off: the query visits every lane it names, so its cost estimate
-- passes jit_above_cost once there are a few hundred, and compiling it
-- cost nearly as much as running it (14.5 ms on top of 18-20 ms, measured
-- with 1,000 lanes).
CREATE OR REPLACE FUNCTION {{schema}}.claim_named(p_lanes text[], p_agent text, p_reach int)
RETURNS text[] LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    v_lanes text[];
BEGIN
    SELECT array_agg(d.name ORDER BY d.priority, d.run_after, d.id) INTO v_lanes
    FROM (
        -- Sorted below, filtered above: the live runs are counted only
        -- for the best lanes, until p_reach of them have room.
        SELECT c.name, c.priority, c.run_after, c.id
        FROM (
            SELECT l.name, l.max_running, b.priority, b.run_after, b.id
            FROM {{schema}}.lanes l
            CROSS JOIN LATERAL (
                (SELECT t.priority, t.run_after, t.id FROM {{schema}}.tasks t
                 WHERE t.lane = l.name AND t.state = 'queued' AND t.run_after <= v_now
                   AND (p_agent IS NULL OR t.agent = p_agent)
                 ORDER BY t.priority, t.run_after, t.id LIMIT 1)
                UNION ALL
                (SELECT t.priority, t.run_after, t.id FROM {{schema}}.runs r
                 JOIN {{schema}}.tasks t ON t.id = r.task_id
                 WHERE r.lane = l.name AND r.state = 'running' AND r.lease_expires_at <= v_now
                   AND (p_agent IS NULL OR t.agent = p_agent))
                ORDER BY 1, 2, 3 LIMIT 1
            ) b
            WHERE l.name = ANY (p_lanes) AND NOT l.paused
            ORDER BY b.priority, b.run_after, b.id
        ) c
        WHERE (SELECT count(*) FROM {{schema}}.runs r
               WHERE r.lane = c.name AND r.state = 'running' AND r.lease_expires_at > v_now) < c.max_running
        LIMIT p_reach
    ) d;
    RETURN v_lanes;
END $$;
