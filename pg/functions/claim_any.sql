-- claim_any returns the lanes a claim of p_n tasks of any lane should try,
-- best task first, at most p_reach of them; NULL when none has work and
-- room. The candidates are the lanes of the head of the queue (claim_head:
-- the first tasks in claim order, read through an index of their own, so
-- that the cost does not grow with the number of lanes) and of expired
-- runs. When the head was cut short and its lanes have room for fewer than
-- p_n tasks, every unpaused lane is a candidate, which is what any lane
-- means (claim_named over all of them: O(lanes)).
--
-- Expired runs are looked for among every live run (O(live runs): no index
-- may cover the lease, which every heartbeat writes), so only when the head
-- leaves the claim short, or when this session has not looked for a second
-- (qd.claim_live_scan holds when it last did). JIT is off, for the reason
-- claim_named gives.
CREATE OR REPLACE FUNCTION {{schema}}.claim_any(p_agent text, p_n int, p_reach int)
RETURNS text[] LANGUAGE plpgsql SET enable_seqscan = off SET jit = off AS $$
DECLARE
    v_now   timestamptz := clock_timestamp();
    -- How many tasks at the head of the queue to read.
    v_head  int := p_reach * 2;
    v_scan  boolean := coalesce(nullif(current_setting('qd.claim_live_scan', true), '')::float8, 0)
                       <= extract(epoch FROM v_now) - 1;
    v_seen  int;
    v_room  bigint;
    v_lanes text[];
BEGIN
    LOOP
        WITH head AS MATERIALIZED (
            SELECT h.lane, h.priority, h.run_after, h.id FROM {{schema}}.claim_head(p_agent, v_head) h
        )
        SELECT (SELECT count(*) FROM head), array_agg(d.name ORDER BY d.priority, d.run_after, d.id), sum(d.room)
        INTO v_seen, v_lanes, v_room
        FROM (
            -- Sorted below, filtered above, as in claim_named; the best
            -- task of a lane is its first in the head.
            SELECT c.name, c.priority, c.run_after, c.id, c.room
            FROM (
              SELECT c.name, c.priority, c.run_after, c.id, c.max_running - (
                  SELECT count(*) FROM {{schema}}.runs r
                  WHERE r.lane = c.name AND r.state = 'running' AND r.lease_expires_at > v_now) AS room
              FROM (
                SELECT l.name, l.max_running, b.priority, b.run_after, b.id
                FROM (
                    SELECT DISTINCT ON (e.lane) e.lane, e.priority, e.run_after, e.id
                    FROM (
                        -- The head holds tasks not yet due too (so that its
                        -- read is bounded however many wait): left out here.
                        SELECT h.lane, h.priority, h.run_after, h.id FROM head h
                        WHERE h.run_after <= v_now
                        UNION ALL
                        SELECT r.lane, t.priority, t.run_after, t.id FROM {{schema}}.runs r
                        JOIN {{schema}}.tasks t ON t.id = r.task_id
                        -- Every live run (lane > '' is every lane), never
                        -- the history, and only when v_scan says so.
                        WHERE v_scan AND r.state = 'running' AND r.lane > '' AND r.lease_expires_at <= v_now
                          AND (p_agent IS NULL OR t.agent = p_agent)
                    ) e
                    ORDER BY e.lane, e.priority, e.run_after, e.id
                ) b
                JOIN {{schema}}.lanes l ON l.name = b.lane
                WHERE NOT l.paused
                ORDER BY b.priority, b.run_after, b.id
              ) c
            ) c
            WHERE c.room > 0
            LIMIT p_reach
        ) d;
        EXIT WHEN v_scan OR coalesce(v_room, 0) >= p_n;
        v_scan := true;
    END LOOP;
    IF v_scan THEN
        PERFORM set_config('qd.claim_live_scan', extract(epoch FROM v_now)::text, false);
    END IF;
    IF v_seen = v_head AND coalesce(v_room, 0) < p_n THEN
        v_lanes := {{schema}}.claim_named(ARRAY(SELECT l.name FROM {{schema}}.lanes l WHERE NOT l.paused), p_agent, p_reach);
    END IF;
    RETURN v_lanes;
END $$;
