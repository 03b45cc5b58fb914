-- claim takes up to p_n tasks in one transaction. For each lane it covers
-- (best task first) it takes the lane's advisory lock, reaps the lane,
-- counts its live runs in a statement that starts after the lock is held,
-- and takes what the lane's limit allows. With several candidate lanes a
-- lane whose lock is held is skipped rather than waited for; when every
-- candidate was locked it waits on the first one. The caller must run it
-- at READ COMMITTED, so that each statement sees the claims it waited for.
--
-- Every statement has one fixed, index-searching plan. One candidate query
-- with p_lanes IS NULL OR ... filters would leave the planner two bad
-- choices on every call: plan again (0.2-0.4 ms) or keep a generic plan
-- that scans every lane. So the cases are apart:
--
-- * one named lane: no candidate query at all; the claim waits for the
--   lane's lock, since there is nothing else to do;
-- * several named lanes: the candidates are found through the lanes key;
-- * any lane: the candidates are the lanes of the head of the queue, the
--   first tasks in claim order (read through an index of their own, so
--   the cost does not grow with the number of lanes), and of expired runs
--   (O(live runs)). When that head was cut short and gave fewer lanes with
--   room than tasks asked for, every unpaused lane is a candidate, which
--   is what any lane means (O(lanes); that query runs with JIT off:
--   compiling it cost nearly as much as running it).
--
-- A candidate list is cut at v_reach lanes with room, sorted by their best
-- task, so that the live runs of every lane are not counted on each call.
-- In each lane it locks, one statement that starts after the lock is held
-- reads the lane's limit, counts its live runs and sees whether any
-- expired; the claim reaps (and counts again) only when one did.
--
-- p_token names the claim; the client chooses it and sends the same token
-- again when it could not learn whether an earlier call committed (the
-- connection died around COMMIT). Every run a claim makes records it. A
-- claim first takes the token's advisory lock (so a retry waits for an
-- earlier call still in flight) and looks for runs with its token: when
-- there are any, that claim committed, and this call returns those of its
-- runs that are still live, claiming nothing. p_n = 0 only looks.
CREATE OR REPLACE FUNCTION {{schema}}.claim(
    p_lanes text[], p_agent text, p_owner text, p_instance text, p_lease interval, p_n int,
    p_token text)
RETURNS TABLE (task_id bigint, run_id bigint, lane text, agent text, attempt int,
               max_attempts int, priority int, payload text, lease_expires_at timestamptz,
               run_after timestamptz)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_cands   text[];
    v_skipped text[] := '{}';
    v_lane    text;
    v_block   boolean;
    v_limit   int;
    v_paused  boolean;
    v_live    int;
    v_expired int;
    v_take    int;
    v_got     int;
    v_left    int := p_n;
    v_now     timestamptz;
    v_waited  boolean := false;
    v_task    bigint;
    v_run     bigint;
    v_agent   text;
    v_attempt int;
    v_max     int;
    v_prio    int;
    v_payload text;
    v_expires timestamptz;
    v_after   timestamptz;
    v_jit     text;
    v_seen    int;
    v_room    bigint;
    v_scan    boolean;
    -- How many candidate lanes a claim over several lanes considers: enough
    -- that claimers racing for the same best lanes find free ones behind
    -- them, without counting the live runs of every lane.
    v_reach   int := greatest(p_n, 1) * 4 + 32;
    -- How many tasks at the head of the queue an any-lane claim reads.
    v_head    int := (greatest(p_n, 1) * 4 + 32) * 2;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'qd claim must run at READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_token IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock({{tokenspace}}, hashtext(p_token));
        -- A new statement after the lock: it sees an earlier call that
        -- committed while this one waited.
        IF EXISTS (SELECT FROM {{schema}}.runs r WHERE r.claim_token = p_token) THEN
            RETURN QUERY
            SELECT t.id, r.id, r.lane, r.agent, r.attempt, t.max_attempts, t.priority, t.payload_text, r.lease_expires_at,
                   t.run_after
            FROM {{schema}}.runs r JOIN {{schema}}.tasks t ON t.id = r.task_id
            WHERE r.claim_token = p_token AND r.owner = p_owner AND r.state = 'running'
              AND r.lease_expires_at > clock_timestamp()
            ORDER BY t.priority, t.run_after, t.id;
            RETURN;
        END IF;
    END IF;
    IF p_n < 1 OR cardinality(p_lanes) = 0 THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    IF cardinality(p_lanes) = 1 THEN
        -- One named lane: whether it has work or room is known only once
        -- its lock is held, so ask nothing before.
        v_cands := p_lanes;
    ELSE
        -- The candidate query visits every lane it covers, so its cost
        -- estimate passes jit_above_cost once there are a few hundred
        -- lanes, and compiling it costs nearly as much as running it
        -- (14.5 ms on top of 18-20 ms, measured with 1,000 lanes). Turn
        -- JIT off for this statement only.
        v_jit := current_setting('jit');
        IF v_jit <> 'off' THEN
            PERFORM set_config('jit', 'off', true);
        END IF;
        IF p_lanes IS NOT NULL THEN
            SELECT array_agg(d.name ORDER BY d.priority, d.run_after, d.id) INTO v_cands
            FROM (
                -- Sorted below, filtered above: the live runs are counted only
                -- for the best lanes, until v_reach of them have room.
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
                LIMIT v_reach
            ) d;
        ELSE
            -- Any lane: the lanes of the head of the queue. A plan of its
            -- own for each case, so that each reads its own index.
            -- Expired runs are looked for among every live run
            -- (O(live runs): no index may cover the lease, which every
            -- heartbeat writes), so only when the head leaves the claim
            -- short, or when this session has not looked for a second.
            v_scan := coalesce(nullif(current_setting('qd.claim_live_scan', true), '')::float8, 0)
                      <= extract(epoch FROM v_now) - 1;
            LOOP
                IF p_agent IS NULL THEN
                    WITH head AS MATERIALIZED (
                        -- Future tasks are read too (and left out above), so that
                        -- the read is bounded however many wait for their time.
                        SELECT t.lane, t.priority, t.run_after, t.id FROM {{schema}}.tasks t
                        WHERE t.state = 'queued' AND t.priority IS NOT NULL
                        ORDER BY t.priority, t.run_after, t.id
                        LIMIT v_head
                    )
                    SELECT (SELECT count(*) FROM head), array_agg(d.name ORDER BY d.priority, d.run_after, d.id), sum(d.room)
                    INTO v_seen, v_cands, v_room
                    FROM (
                        -- Sorted below, filtered above, as for named lanes; the
                        -- best task of a lane is its first in the head.
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
                        LIMIT v_reach
                    ) d;
                ELSE
                    WITH head AS MATERIALIZED (
                        -- Future tasks are read too (and left out above), so that
                        -- the read is bounded however many wait for their time.
                        SELECT t.lane, t.priority, t.run_after, t.id FROM {{schema}}.tasks t
                        WHERE t.state = 'queued' AND t.priority IS NOT NULL AND t.agent = p_agent
                        ORDER BY t.priority, t.run_after, t.id
                        LIMIT v_head
                    )
                    SELECT (SELECT count(*) FROM head), array_agg(d.name ORDER BY d.priority, d.run_after, d.id), sum(d.room)
                    INTO v_seen, v_cands, v_room
                    FROM (
                        -- Sorted below, filtered above, as for named lanes; the
                        -- best task of a lane is its first in the head.
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
                        LIMIT v_reach
                    ) d;
                END IF;
                EXIT WHEN v_scan OR coalesce(v_room, 0) >= p_n;
                v_scan := true;
            END LOOP;
            IF v_scan THEN
                PERFORM set_config('qd.claim_live_scan', extract(epoch FROM v_now)::text, false);
            END IF;
            IF v_seen = v_head AND coalesce(v_room, 0) < p_n THEN
                -- The head was cut short and its lanes have room for
                -- fewer tasks than asked: every unpaused lane is a
                -- candidate.
                SELECT array_agg(d.name ORDER BY d.priority, d.run_after, d.id) INTO v_cands
                FROM (
                    -- Sorted below, filtered above: the live runs are counted only
                    -- for the best lanes, until v_reach of them have room.
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
                        WHERE NOT l.paused
                        ORDER BY b.priority, b.run_after, b.id
                    ) c
                    WHERE (SELECT count(*) FROM {{schema}}.runs r
                           WHERE r.lane = c.name AND r.state = 'running' AND r.lease_expires_at > v_now) < c.max_running
                    LIMIT v_reach
                ) d;
            END IF;
        END IF;
        IF v_jit <> 'off' THEN
            PERFORM set_config('jit', v_jit, true);
        END IF;
    END IF;
    IF v_cands IS NULL THEN
        RETURN;
    END IF;
    -- A single candidate may wait for its lock: there is nothing else to do.
    v_block := cardinality(v_cands) = 1;
    LOOP
        FOREACH v_lane IN ARRAY v_cands LOOP
            EXIT WHEN v_left <= 0;
            IF v_block THEN
                PERFORM pg_advisory_xact_lock({{lockspace}}, {{schema}}.lane_key(v_lane));
                v_block := false;
                v_waited := true;
            ELSIF NOT pg_try_advisory_xact_lock({{lockspace}}, {{schema}}.lane_key(v_lane)) THEN
                v_skipped := v_skipped || v_lane;
                CONTINUE;
            END IF;
            -- A new statement, so a new snapshot: it sees every claim that
            -- committed before the lock was granted.
            v_now := clock_timestamp();
            SELECT l.max_running, l.paused, c.live, c.expired
            INTO v_limit, v_paused, v_live, v_expired
            FROM {{schema}}.lanes l
            CROSS JOIN LATERAL (
                SELECT count(*) AS live, count(*) FILTER (WHERE r.lease_expires_at <= v_now) AS expired
                FROM {{schema}}.runs r
                WHERE r.lane = v_lane AND r.state = 'running') c
            WHERE l.name = v_lane;
            IF v_expired > 0 THEN
                PERFORM {{schema}}.reap_lane(v_lane);
                v_now := clock_timestamp();
                SELECT count(*) INTO v_live FROM {{schema}}.runs r
                WHERE r.lane = v_lane AND r.state = 'running';
            END IF;
            CONTINUE WHEN v_paused IS NOT FALSE;
            v_take := least(v_limit - v_live, v_left);
            CONTINUE WHEN v_take <= 0;
            IF v_take = 1 THEN
                -- One task (every Claim): two plain statements cost less
                -- than the data-modifying CTE below.
                UPDATE {{schema}}.tasks t SET state = 'running', attempts = t.attempts + 1, updated_at = v_now
                WHERE t.id = (
                    SELECT x.id FROM {{schema}}.tasks x
                    WHERE x.lane = v_lane AND x.state = 'queued' AND x.run_after <= v_now
                      AND (p_agent IS NULL OR x.agent = p_agent)
                    ORDER BY x.priority, x.run_after, x.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
                RETURNING t.id, t.agent, t.attempts, t.max_attempts, t.priority, t.payload_text, t.run_after
                INTO v_task, v_agent, v_attempt, v_max, v_prio, v_payload, v_after;
                CONTINUE WHEN NOT FOUND;
                INSERT INTO {{schema}}.runs AS r (task_id, lane, agent, attempt, owner, instance, state,
                                                  started_at, last_heartbeat_at, lease_expires_at, claim_token)
                VALUES (v_task, v_lane, v_agent, v_attempt, p_owner, p_instance, 'running', v_now, v_now, v_now + p_lease,
                        p_token)
                RETURNING r.id, r.lease_expires_at INTO v_run, v_expires;
                task_id := v_task; run_id := v_run; lane := v_lane; agent := v_agent; attempt := v_attempt;
                max_attempts := v_max; priority := v_prio; payload := v_payload; lease_expires_at := v_expires;
                run_after := v_after;
                RETURN NEXT;
                v_left := v_left - 1;
                CONTINUE;
            END IF;
            RETURN QUERY
            WITH picked AS (
                SELECT t.id FROM {{schema}}.tasks t
                WHERE t.lane = v_lane AND t.state = 'queued' AND t.run_after <= v_now
                  AND (p_agent IS NULL OR t.agent = p_agent)
                ORDER BY t.priority, t.run_after, t.id
                LIMIT v_take
                FOR UPDATE SKIP LOCKED
            ), upd AS (
                UPDATE {{schema}}.tasks t SET state = 'running', attempts = t.attempts + 1, updated_at = v_now
                WHERE t.id IN (SELECT p.id FROM picked p)
                RETURNING t.id, t.lane, t.agent, t.attempts, t.max_attempts, t.priority, t.payload_text, t.run_after
            ), ins AS (
                INSERT INTO {{schema}}.runs (task_id, lane, agent, attempt, owner, instance, state,
                                             started_at, last_heartbeat_at, lease_expires_at, claim_token)
                SELECT u.id, u.lane, u.agent, u.attempts, p_owner, p_instance, 'running', v_now, v_now, v_now + p_lease,
                       p_token
                FROM upd u
                RETURNING id, task_id, lease_expires_at
            )
            SELECT u.id, i.id, u.lane, u.agent, u.attempts, u.max_attempts, u.priority, u.payload_text, i.lease_expires_at,
                   u.run_after
            FROM upd u JOIN ins i ON i.task_id = u.id
            ORDER BY u.priority, u.run_after, u.id;
            GET DIAGNOSTICS v_got = ROW_COUNT;
            v_left := v_left - v_got;
        END LOOP;
        -- Every candidate was locked by another claimer: wait on the first
        -- rather than answer "nothing" while work is there, then try the
        -- rest without waiting (waiting on a second lock while holding one
        -- could deadlock).
        EXIT WHEN v_waited OR v_left < p_n OR cardinality(v_skipped) < cardinality(v_cands);
        v_cands := v_skipped;
        v_skipped := '{}';
        v_block := true;
    END LOOP;
END $$;
