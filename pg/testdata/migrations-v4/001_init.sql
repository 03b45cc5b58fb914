-- qd queue schema, version 1. {{schema}} is replaced by the quoted schema
-- name before this runs. Table and column names are a public contract:
-- operators query them with psql.

CREATE TABLE {{schema}}.lanes (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    max_running int NOT NULL DEFAULT 1 CHECK (max_running >= 1),
    paused      boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE {{schema}}.tasks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane             text NOT NULL REFERENCES {{schema}}.lanes (name),
    agent            text NOT NULL,
    payload          jsonb NOT NULL,
    -- The exact text enqueued: jsonb normalises whitespace and key order,
    -- and agents receive the payload byte for byte.
    payload_text     text NOT NULL,
    priority         int NOT NULL DEFAULT 0,
    run_after        timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts         int NOT NULL DEFAULT 0,
    max_attempts     int NOT NULL,
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    dedupe_key       text,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at      timestamptz
) WITH (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- A note on the partial indexes below. Under the generic plans of prepared
-- statements (pgx and plpgsql both prepare), and with statistics taken
-- while few runs were live, the planner rates every small partial index as
-- nearly free, and will walk one whose predicate a statement merely
-- implies: a fenced update by id that says state = 'running' would scan
-- every live run. So each predicate also names its key column (IS NOT
-- NULL, always true for these rows), which only statements filtering on
-- that column imply.

-- Eligibility: the best queued task of a lane is the first entry.
CREATE INDEX tasks_eligible_idx ON {{schema}}.tasks (lane, priority, run_after, id)
    WHERE state = 'queued';
-- One unfinished task per dedupe key.
CREATE UNIQUE INDEX tasks_dedupe_key_idx ON {{schema}}.tasks (dedupe_key)
    WHERE state IN ('queued', 'running') AND dedupe_key IS NOT NULL;
-- Prune finds old finished tasks.
CREATE INDEX tasks_finished_at_idx ON {{schema}}.tasks (finished_at)
    WHERE finished_at IS NOT NULL;

-- Heartbeats rewrite lease_expires_at, last_heartbeat_at, pid and
-- last_output_at many times a minute. None of them is indexed, so those
-- updates are HOT (no index writes, no index bloat); fillfactor leaves the
-- page room they need.
CREATE TABLE {{schema}}.runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id           bigint NOT NULL REFERENCES {{schema}}.tasks (id) ON DELETE CASCADE,
    lane              text NOT NULL,
    agent             text NOT NULL,
    attempt           int NOT NULL,
    owner             text NOT NULL,
    instance          text NOT NULL DEFAULT '',
    state             text NOT NULL DEFAULT 'running'
                      CHECK (state IN ('running', 'completed', 'failed', 'abandoned', 'cancelled')),
    pid               int,
    started_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_expires_at  timestamptz NOT NULL,
    last_output_at    timestamptz,
    finished_at       timestamptz,
    exit_code         int,
    signal            text,
    summary           text,
    output_tail       text
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Live runs of a lane: the reap and the lane count read only these.
CREATE INDEX runs_running_lane_idx ON {{schema}}.runs (lane)
    WHERE state = 'running' AND lane IS NOT NULL;
CREATE INDEX runs_task_id_idx ON {{schema}}.runs (task_id);
-- A restarted daemon abandons its previous incarnation's runs through this.
CREATE INDEX runs_running_owner_idx ON {{schema}}.runs (owner)
    WHERE state = 'running' AND owner IS NOT NULL;

CREATE TABLE {{schema}}.periodic (
    name      text PRIMARY KEY,
    last_tick timestamptz
);

-- lane_key is the advisory lock key of a lane: the first 32 bits of the
-- md5 of its name, as a signed integer. It must never change: daemons of
-- different versions exclude each other only while they agree on it.
CREATE FUNCTION {{schema}}.lane_key(name text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ('x' || substr(md5(name), 1, 8))::bit(32)::int $$;

-- backoff is the delay before the next attempt after attempt failed:
-- base doubled per attempt, capped at an hour, with ±20% jitter.
CREATE FUNCTION {{schema}}.backoff(attempt int, base interval) RETURNS interval
LANGUAGE sql VOLATILE
AS $$ SELECT d * (0.8 + 0.4 * random())
      FROM (SELECT least(base * power(2, least(greatest(attempt, 1) - 1, 30)), interval '1 hour') AS d) s $$;

-- finish_task moves the task of a run that just ended with outcome.
-- A cancel request wins over a retry; a failed attempt waits retry_in
-- (or the backoff); an abandoned one is claimable at once; refund gives
-- the attempt back.
CREATE FUNCTION {{schema}}.finish_task(p_task bigint, p_outcome text, p_retry_in interval, p_refund boolean)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_now    timestamptz := clock_timestamp();
    v_refund boolean := coalesce(p_refund, false) AND p_outcome = 'abandoned';
BEGIN
    UPDATE {{schema}}.tasks t SET
        attempts = CASE WHEN v_refund AND t.attempts > 0 THEN t.attempts - 1 ELSE t.attempts END,
        state = CASE
            WHEN p_outcome = 'completed' THEN 'done'
            WHEN p_outcome = 'cancelled' OR t.cancel_requested THEN 'cancelled'
            WHEN (CASE WHEN v_refund AND t.attempts > 0 THEN t.attempts - 1 ELSE t.attempts END) < t.max_attempts THEN 'queued'
            ELSE 'failed' END,
        run_after = CASE
            WHEN p_outcome = 'failed' THEN v_now + coalesce(p_retry_in, {{schema}}.backoff(t.attempts, interval '10 seconds'))
            WHEN p_outcome = 'abandoned' THEN v_now
            ELSE t.run_after END,
        updated_at = v_now
    WHERE t.id = p_task AND t.state = 'running';
    UPDATE {{schema}}.tasks t SET finished_at = v_now
    WHERE t.id = p_task AND t.state IN ('done', 'failed', 'cancelled') AND t.finished_at IS NULL;
END $$;

-- reap_lane abandons the expired runs of one lane and moves their tasks.
-- The caller holds the lane lock. It reads runs through the live-runs-by-
-- lane index, so it costs O(lane limit).
CREATE FUNCTION {{schema}}.reap_lane(p_lane text) RETURNS int
LANGUAGE plpgsql AS $$
DECLARE
    r record;
    n int := 0;
BEGIN
    FOR r IN
        UPDATE {{schema}}.runs x SET
            state = 'abandoned',
            finished_at = clock_timestamp(),
            summary = 'lease expired: silent for '
                || round(extract(epoch FROM clock_timestamp() - x.last_heartbeat_at))::bigint || 's'
        WHERE x.lane = p_lane AND x.state = 'running' AND x.lease_expires_at <= clock_timestamp()
        RETURNING x.task_id
    LOOP
        PERFORM {{schema}}.finish_task(r.task_id, 'abandoned', NULL, false);
        n := n + 1;
    END LOOP;
    RETURN n;
END $$;

-- claim takes up to p_n tasks in one transaction. For each lane it covers
-- (best task first) it takes the lane's advisory lock, reaps the lane,
-- counts its live runs in a statement that starts after the lock is held,
-- and takes what the lane's limit allows. With several candidate lanes a
-- lane whose lock is held is skipped rather than waited for; when every
-- candidate was locked it waits on the first one. The caller must run it
-- at READ COMMITTED, so that each statement sees the claims it waited for.
CREATE FUNCTION {{schema}}.claim(
    p_lanes text[], p_agent text, p_owner text, p_instance text, p_lease interval, p_n int)
RETURNS TABLE (task_id bigint, run_id bigint, lane text, agent text, attempt int,
               max_attempts int, priority int, payload text, lease_expires_at timestamptz)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    v_cands   text[];
    v_skipped text[] := '{}';
    v_lane    text;
    v_block   boolean;
    v_limit   int;
    v_paused  boolean;
    v_live    int;
    v_take    int;
    v_got     int;
    v_left    int := p_n;
    v_now     timestamptz;
    v_waited  boolean := false;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'qd claim must run at READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_n < 1 THEN
        RETURN;
    END IF;
    v_now := clock_timestamp();
    IF p_lanes IS NULL THEN
        SELECT array_agg(l.name) INTO p_lanes FROM {{schema}}.lanes l WHERE NOT l.paused;
    END IF;
    SELECT array_agg(c.name ORDER BY c.priority, c.run_after, c.id) INTO v_cands
    FROM (
        SELECT l.name, b.priority, b.run_after, b.id
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
          AND l.name = ANY (p_lanes)
          AND ((SELECT count(*) FROM {{schema}}.runs r
                WHERE r.lane = l.name AND r.state = 'running' AND r.lease_expires_at > v_now) < l.max_running)
    ) c;
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
            PERFORM {{schema}}.reap_lane(v_lane);
            SELECT l.max_running, l.paused INTO v_limit, v_paused
            FROM {{schema}}.lanes l WHERE l.name = v_lane;
            CONTINUE WHEN v_paused IS NOT FALSE;
            -- A new statement, so a new snapshot: it sees every claim that
            -- committed before the lock was granted.
            SELECT count(*) INTO v_live FROM {{schema}}.runs r
            WHERE r.lane = v_lane AND r.state = 'running';
            v_take := least(v_limit - v_live, v_left);
            CONTINUE WHEN v_take <= 0;
            v_now := clock_timestamp();
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
                                             started_at, last_heartbeat_at, lease_expires_at)
                SELECT u.id, u.lane, u.agent, u.attempts, p_owner, p_instance, 'running', v_now, v_now, v_now + p_lease
                FROM upd u
                RETURNING id, task_id, lease_expires_at
            )
            SELECT u.id, i.id, u.lane, u.agent, u.attempts, u.max_attempts, u.priority, u.payload_text, i.lease_expires_at
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

-- heartbeat extends the leases of live runs, all in one statement. A run
-- whose lease has expired is lost even before it is reaped. Only unindexed
-- columns of runs change, so the updates are HOT.
CREATE FUNCTION {{schema}}.heartbeat(p_ids bigint[], p_lease interval[], p_pids int[], p_output timestamptz[])
RETURNS TABLE (run_id bigint, lease_expires_at timestamptz, cancel_requested boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH b AS (
        SELECT * FROM unnest(p_ids, p_lease, p_pids, p_output) AS b(id, lease, pid, output)
    ), u AS (
        UPDATE {{schema}}.runs r SET
            lease_expires_at = clock_timestamp() + b.lease,
            last_heartbeat_at = clock_timestamp(),
            pid = coalesce(b.pid, r.pid),
            last_output_at = coalesce(b.output, r.last_output_at)
        FROM b
        WHERE r.id = b.id AND r.state = 'running' AND r.lease_expires_at > clock_timestamp()
        RETURNING r.id, r.task_id, r.lease_expires_at
    )
    SELECT u.id, u.lease_expires_at, t.cancel_requested
    FROM u JOIN {{schema}}.tasks t ON t.id = u.task_id;
END $$;

-- settle ends runs, each fenced on its own: a run still live ends with its
-- outcome; one already ended with the same outcome answers 'same' (a
-- retried settlement whose commit reply was lost); any other answers
-- 'lost', and an unknown id 'missing'.
CREATE FUNCTION {{schema}}.settle(
    p_ids bigint[], p_outcomes text[], p_summaries text[], p_exit_codes int[],
    p_signals text[], p_tails text[], p_retry_in interval[], p_refunds boolean[])
RETURNS TABLE (run_id bigint, status text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    i       int;
    v_task  bigint;
    v_state text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
        UPDATE {{schema}}.runs r SET
            state = p_outcomes[i],
            finished_at = clock_timestamp(),
            summary = p_summaries[i],
            exit_code = p_exit_codes[i],
            signal = p_signals[i],
            output_tail = coalesce(p_tails[i], r.output_tail)
        WHERE r.id = p_ids[i] AND r.state = 'running' AND r.lease_expires_at > clock_timestamp()
        RETURNING r.task_id INTO v_task;
        IF FOUND THEN
            PERFORM {{schema}}.finish_task(v_task, p_outcomes[i], p_retry_in[i], p_refunds[i]);
            run_id := p_ids[i]; status := 'ok';
        ELSE
            SELECT r.state INTO v_state FROM {{schema}}.runs r WHERE r.id = p_ids[i];
            run_id := p_ids[i];
            status := CASE WHEN v_state IS NULL THEN 'missing'
                           WHEN v_state = p_outcomes[i] THEN 'same'
                           ELSE 'lost' END;
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;

-- abandon_owner abandons every running run of p_owner not belonging to
-- p_keep (a restarted daemon clearing its previous incarnation's runs).
CREATE FUNCTION {{schema}}.abandon_owner(p_owner text, p_keep text, p_summary text)
RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    FOR r IN
        UPDATE {{schema}}.runs x SET state = 'abandoned', finished_at = clock_timestamp(), summary = p_summary
        WHERE x.owner = p_owner AND x.state = 'running' AND x.instance IS DISTINCT FROM p_keep
        RETURNING x.id, x.task_id
    LOOP
        PERFORM {{schema}}.finish_task(r.task_id, 'abandoned', NULL, false);
        RETURN NEXT r.id;
    END LOOP;
END $$;

-- enqueue adds a task, or returns the unfinished task with the same dedupe
-- key (existed = true) and writes nothing. Each statement sees what
-- committed before it started, so a racing enqueue of the same key is found
-- on the next turn of the loop.
CREATE FUNCTION {{schema}}.enqueue(
    p_lane text, p_agent text, p_payload text, p_priority int, p_run_after timestamptz,
    p_delay interval, p_max_attempts int, p_key text, OUT id bigint, OUT existed boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    FOR i IN 1 .. 100 LOOP
        IF p_key IS NOT NULL THEN
            SELECT t.id INTO id FROM {{schema}}.tasks t
            WHERE t.dedupe_key = p_key AND t.state IN ('queued', 'running');
            IF FOUND THEN
                existed := true;
                RETURN;
            END IF;
        END IF;
        INSERT INTO {{schema}}.lanes (name) VALUES (p_lane) ON CONFLICT DO NOTHING;
        INSERT INTO {{schema}}.tasks AS t (lane, agent, payload, payload_text, priority, run_after,
                                      max_attempts, state, dedupe_key)
        VALUES (p_lane, p_agent, p_payload::jsonb, p_payload, p_priority,
                coalesce(p_run_after, clock_timestamp() + coalesce(p_delay, interval '0')),
                p_max_attempts, 'queued', p_key)
        ON CONFLICT (dedupe_key) WHERE state IN ('queued', 'running') AND dedupe_key IS NOT NULL DO NOTHING
        RETURNING t.id INTO id;
        IF FOUND THEN
            existed := false;
            RETURN;
        END IF;
    END LOOP;
    RAISE EXCEPTION 'enqueue: dedupe key % kept changing hands', p_key
        USING ERRCODE = 'serialization_failure';
END $$;
