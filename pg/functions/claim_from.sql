-- claim_from takes up to p_n tasks from the lanes p_lanes, in that order,
-- for claim. In each lane it takes the lane's advisory lock, then one
-- statement that starts after the lock is held (so it sees every claim it
-- waited for) reads the lane's limit, counts its live runs and sees whether
-- any expired; it reaps (and counts again) only when one did, and allots
-- the lane what its limit allows. A lane whose lock is held is skipped
-- rather than waited for, unless it is the only one; when every lane was
-- locked it waits on the first.
--
-- The allotted lanes are then taken from together, in one data-modifying
-- statement (each lane's best tasks FOR UPDATE SKIP LOCKED, up to its
-- share; the tasks marked running; their runs written), since a
-- statement's start-up and its index openings, not its rows, were most of
-- the cost of a lane taken on its own (a claim of 32 tasks over 64 lanes
-- of limit 1 took 5.3 ms where 32 from one lane took 1.4 ms). Between the
-- count and the take the lanes' locks are held, so no claim or reap adds a
-- live run to them; a settlement may only make room. When a lane had
-- fewer tasks than its share, the lanes after it are visited for the rest.
-- The statement reads its clock after its snapshot, so that the runs it
-- makes start after the end of every run it saw ended. One task of one
-- lane (every Claim) takes two plain statements, which cost less.
--
-- claim is its one caller, and its plans are made under claim's settings
-- (enable_seqscan off): a SET clause of its own cost every Claim 3-6%
-- (saving and restoring the setting at each call; measured with pgbench,
-- one claimer, claims of one lane).
CREATE OR REPLACE FUNCTION {{schema}}.claim_from(
    p_lanes text[], p_agent text, p_owner text, p_instance text, p_lease interval, p_n int,
    p_token text)
RETURNS TABLE (task_id bigint, run_id bigint, lane text, agent text, attempt int,
               max_attempts int, priority int, payload text, lease_expires_at timestamptz,
               run_after timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_lanes   text[] := p_lanes;
    v_i       int := 1;
    v_skipped text[] := '{}';
    v_lane    text;
    -- A single lane may wait for its lock: there is nothing else to do.
    v_block   boolean := cardinality(p_lanes) = 1;
    v_waited  boolean := false;
    v_left    int := p_n;
    -- The lanes allotted a share (v_takes) and not yet taken from, and
    -- the sum of their shares.
    v_allot   text[] := '{}';
    v_takes   int[] := '{}';
    v_want    int := 0;
    v_now     timestamptz;
    v_limit   int;
    v_paused  boolean;
    v_live    int;
    v_expired int;
    v_take    int;
    v_got     int;
    v_task    record;
    v_run     record;
BEGIN
    IF p_lanes IS NULL THEN
        RETURN;
    END IF;
    LOOP
        WHILE v_i <= cardinality(v_lanes) AND v_left > 0 LOOP
            -- Allot lanes their shares until the claim is covered.
            WHILE v_i <= cardinality(v_lanes) AND v_want < v_left LOOP
                v_lane := v_lanes[v_i];
                v_i := v_i + 1;
                IF v_block THEN
                    PERFORM pg_advisory_xact_lock({{lockspace}}, {{schema}}.lane_key(v_lane));
                    v_block := false;
                    v_waited := true;
                ELSIF NOT pg_try_advisory_xact_lock({{lockspace}}, {{schema}}.lane_key(v_lane)) THEN
                    v_skipped := v_skipped || v_lane;
                    CONTINUE;
                END IF;
                -- A new statement, so a new snapshot: it sees every claim
                -- that committed before the lock was granted.
                SELECT l.max_running, l.paused, c.live, c.expired, n.now
                INTO v_limit, v_paused, v_live, v_expired, v_now
                FROM (SELECT clock_timestamp() AS now) n
                CROSS JOIN {{schema}}.lanes l
                CROSS JOIN LATERAL (
                    SELECT count(*) AS live, count(*) FILTER (WHERE r.lease_expires_at <= n.now) AS expired
                    FROM {{schema}}.runs r
                    WHERE r.lane = v_lane AND r.state = 'running') c
                WHERE l.name = v_lane;
                IF v_expired > 0 THEN
                    PERFORM {{schema}}.reap_lane(v_lane);
                    SELECT count(*) INTO v_live FROM {{schema}}.runs r
                    WHERE r.lane = v_lane AND r.state = 'running';
                END IF;
                CONTINUE WHEN v_paused IS NOT FALSE;
                v_take := least(v_limit - v_live, v_left - v_want);
                CONTINUE WHEN v_take <= 0;
                v_allot := v_allot || v_lane;
                v_takes := v_takes || v_take;
                v_want := v_want + v_take;
            END LOOP;
            EXIT WHEN v_want = 0;
            IF v_want = 1 THEN
                -- One task of one lane: two plain statements cost less than
                -- the data-modifying statement below.
                v_lane := v_allot[1];
                UPDATE {{schema}}.tasks t SET state = 'running', attempts = t.attempts + 1, updated_at = clock_timestamp()
                WHERE t.id = (
                    SELECT x.id FROM {{schema}}.tasks x
                    WHERE x.lane = v_lane AND x.state = 'queued' AND x.run_after <= clock_timestamp()
                      AND (p_agent IS NOT NULL OR NOT EXISTS (
                          SELECT FROM {{schema}}.agent_pauses a WHERE a.agent = x.agent))
                      AND (p_agent IS NULL OR x.agent = p_agent)
                    ORDER BY x.priority, x.run_after, x.id
                    LIMIT 1
                    FOR UPDATE SKIP LOCKED)
                RETURNING t.id, t.agent, t.attempts, t.max_attempts, t.priority, t.payload_text, t.run_after, t.updated_at
                INTO v_task;
                IF FOUND THEN
                    INSERT INTO {{schema}}.runs AS r (task_id, lane, agent, attempt, owner, instance, state,
                                                      started_at, last_heartbeat_at, lease_expires_at, claim_token)
                    VALUES (v_task.id, v_lane, v_task.agent, v_task.attempts, p_owner, p_instance, 'running',
                            v_task.updated_at, v_task.updated_at, v_task.updated_at + p_lease, p_token)
                    RETURNING r.id, r.lease_expires_at INTO v_run;
                    task_id := v_task.id; run_id := v_run.id; lane := v_lane; agent := v_task.agent;
                    attempt := v_task.attempts; max_attempts := v_task.max_attempts; priority := v_task.priority;
                    payload := v_task.payload_text; lease_expires_at := v_run.lease_expires_at;
                    run_after := v_task.run_after;
                    RETURN NEXT;
                    v_left := v_left - 1;
                END IF;
            ELSIF cardinality(v_allot) = 1 THEN
                -- One lane: its tasks in one statement without the lanes'
                -- join below, which the planner cannot fold away: a claim
                -- of 32 from one lane took 1.48-1.50 ms this way and
                -- 1.79-1.81 ms through the join (pgbench, one client).
                v_lane := v_allot[1];
                RETURN QUERY
                WITH n AS MATERIALIZED (
                    SELECT clock_timestamp() AS now
                ), picked AS (
                    SELECT t.id FROM {{schema}}.tasks t
                    WHERE t.lane = v_lane AND t.state = 'queued' AND t.run_after <= (SELECT n.now FROM n)
                      AND (p_agent IS NOT NULL OR NOT EXISTS (
                          SELECT FROM {{schema}}.agent_pauses a WHERE a.agent = t.agent))
                      AND (p_agent IS NULL OR t.agent = p_agent)
                    ORDER BY t.priority, t.run_after, t.id
                    LIMIT v_want
                    FOR UPDATE SKIP LOCKED
                ), upd AS (
                    UPDATE {{schema}}.tasks t
                    SET state = 'running', attempts = t.attempts + 1, updated_at = (SELECT n.now FROM n)
                    WHERE t.id IN (SELECT p.id FROM picked p)
                    RETURNING t.id, t.lane, t.agent, t.attempts, t.max_attempts, t.priority, t.payload_text, t.run_after
                ), ins AS (
                    INSERT INTO {{schema}}.runs (task_id, lane, agent, attempt, owner, instance, state,
                                                 started_at, last_heartbeat_at, lease_expires_at, claim_token)
                    SELECT u.id, u.lane, u.agent, u.attempts, p_owner, p_instance, 'running', n.now, n.now,
                           n.now + p_lease, p_token
                    FROM upd u, n
                    RETURNING id, task_id, lease_expires_at
                )
                SELECT u.id, i.id, u.lane, u.agent, u.attempts, u.max_attempts, u.priority, u.payload_text,
                       i.lease_expires_at, u.run_after
                FROM upd u JOIN ins i ON i.task_id = u.id
                ORDER BY u.priority, u.run_after, u.id;
                GET DIAGNOSTICS v_got = ROW_COUNT;
                v_left := v_left - v_got;
            ELSE
                RETURN QUERY
                WITH n AS MATERIALIZED (
                    SELECT clock_timestamp() AS now
                ), picked AS MATERIALIZED (
                    SELECT p.id, w.ord
                    FROM unnest(v_allot, v_takes) WITH ORDINALITY AS w(lane, take, ord)
                    CROSS JOIN LATERAL (
                        SELECT t.id FROM {{schema}}.tasks t
                        WHERE t.lane = w.lane AND t.state = 'queued' AND t.run_after <= (SELECT n.now FROM n)
                          AND (p_agent IS NOT NULL OR NOT EXISTS (
                              SELECT FROM {{schema}}.agent_pauses a WHERE a.agent = t.agent))
                          AND (p_agent IS NULL OR t.agent = p_agent)
                        ORDER BY t.priority, t.run_after, t.id
                        LIMIT w.take
                        FOR UPDATE SKIP LOCKED) p
                ), upd AS (
                    UPDATE {{schema}}.tasks t
                    SET state = 'running', attempts = t.attempts + 1, updated_at = (SELECT n.now FROM n)
                    WHERE t.id IN (SELECT p.id FROM picked p)
                    RETURNING t.id, t.lane, t.agent, t.attempts, t.max_attempts, t.priority, t.payload_text, t.run_after
                ), ins AS (
                    INSERT INTO {{schema}}.runs (task_id, lane, agent, attempt, owner, instance, state,
                                                 started_at, last_heartbeat_at, lease_expires_at, claim_token)
                    SELECT u.id, u.lane, u.agent, u.attempts, p_owner, p_instance, 'running', n.now, n.now,
                           n.now + p_lease, p_token
                    FROM upd u, n
                    RETURNING id, task_id, lease_expires_at
                )
                SELECT u.id, i.id, u.lane, u.agent, u.attempts, u.max_attempts, u.priority, u.payload_text,
                       i.lease_expires_at, u.run_after
                FROM upd u JOIN ins i ON i.task_id = u.id JOIN picked p ON p.id = u.id
                ORDER BY p.ord, u.priority, u.run_after, u.id;
                GET DIAGNOSTICS v_got = ROW_COUNT;
                v_left := v_left - v_got;
            END IF;
            v_allot := '{}';
            v_takes := '{}';
            v_want := 0;
        END LOOP;
        -- Every lane was locked by another claimer: wait on the first
        -- rather than answer "nothing" while work is there, then try the
        -- rest without waiting (waiting on a second lock while holding one
        -- could deadlock).
        EXIT WHEN v_waited OR v_left < p_n OR cardinality(v_skipped) < cardinality(v_lanes);
        v_lanes := v_skipped;
        v_skipped := '{}';
        v_i := 1;
        v_block := true;
    END LOOP;
END $$;
