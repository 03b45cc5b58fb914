-- settle_runs ends runs, each fenced on its own, one settlement (a row of
-- the type settlement) per element of p_rows: a run still live ends with its
-- outcome; one already ended with the same outcome answers 'same' (a
-- retried settlement whose commit reply was lost); a completion that comes
-- late (its lease ran out while its daemon could not reach the database)
-- is taken when no other run of the task was claimed since: the run was
-- still marked running, or was reaped (abandoned, its task queued again or
-- failed for good), so nothing overlapped it, and the finished work is not
-- done again; the run ends completed and its task is done. Any other
-- answers 'lost', and an unknown id 'missing', as does a run made by another claim
-- than the settlement's claim_token says (its id was given out again by a
-- database that lost the run); a NULL token is not checked. cpu_usec and
-- memory_peak are what the run's cgroup measured, NULL where it measured
-- nothing; a NULL output_tail keeps the run's. log_error, when set, says
-- why the run's log file is incomplete. A run named twice is settled by its
-- first settlement; the later ones answer as a retry would. A completion's
-- result is kept on its run (NULL with any other outcome). The event of a
-- settlement (a timeout, a stall), when set, is recorded in events once the
-- run has its outcome ('ok' or 'same'), once per run.
--
-- Set-based: one statement ends every live run of the call (in id order,
-- the order of the primary key it reads them by), one moves their tasks
-- (finish_tasks), one answers; one more records the events when the call
-- has any (a timeout or a stall: rare; run at every call, finding nothing
-- to insert, it cost a settlement of one run 6%). A statement's start
-- is most of its cost for a row or two, so a call of 8 runs costs about
-- what a call of one did when each run took its own statements. The plans
-- are generic (one per session): left to choose, the plan cache kept
-- planning each call again, since a generic plan counts on arrays of 10
-- and a call of one run costs less, and planning a call cost more than
-- running it (0.55 ms against 0.12 ms for a call of one run).
CREATE OR REPLACE FUNCTION {{schema}}.settle_runs(p_rows {{schema}}.settlement[])
RETURNS TABLE (run_id bigint, status text)
LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    -- The runs by position (unnest reads an array in order):
    -- p_rows[array_position(v_ids, id)] is the first settlement of run id.
    v_ids      bigint[] := ARRAY(SELECT s.run_id FROM unnest(p_rows) s);
    v_events   boolean;
    v_ended    bigint[];
    v_tasks    bigint[];
    v_outcomes text[];
    v_retry    interval[];
    v_refunds  boolean[];
    v_late     bigint[];
    v_reaped   bigint[];
BEGIN
    WITH ended AS (
        -- By id = ANY, never by a join, for the reason finish_tasks gives.
        UPDATE {{schema}}.runs r SET (state, finished_at, summary, exit_code, signal, output_tail, cpu_usec,
                                      memory_peak, log_error, result) = (
            SELECT (a.s).outcome, clock_timestamp(), (a.s).summary, (a.s).exit_code, (a.s).signal,
                   coalesce((a.s).output_tail, r.output_tail), (a.s).cpu_usec, (a.s).memory_peak, (a.s).log_error,
                   CASE WHEN (a.s).outcome = 'completed' THEN (a.s).result END
            FROM (SELECT p_rows[array_position(v_ids, r.id)] AS s) a)
        WHERE r.id = ANY (v_ids) AND (r.state = 'running') IS TRUE AND r.lease_expires_at > clock_timestamp()
          -- A NULL token matches any run.
          AND r.claim_token IS NOT DISTINCT FROM coalesce((p_rows[array_position(v_ids, r.id)]).claim_token, r.claim_token)
        RETURNING r.id, r.task_id, r.state AS outcome, (p_rows[array_position(v_ids, r.id)]).retry_in AS retry_in,
                  (p_rows[array_position(v_ids, r.id)]).refund AS refund
    )
    SELECT array_agg(e.id), array_agg(e.task_id), array_agg(e.outcome), array_agg(e.retry_in), array_agg(e.refund),
           (SELECT bool_or(s.event IS NOT NULL) FROM unnest(p_rows) s) -- for the events below
    INTO v_ended, v_tasks, v_outcomes, v_retry, v_refunds, v_events
    FROM ended e;
    -- Late completions: rare, so the search costs a call with none one
    -- scan of its own rows. A retried completion (the run already
    -- completed) is dropped at the first lookup.
    v_late := ARRAY(SELECT s.run_id FROM unnest(p_rows) s
                    WHERE (p_rows[array_position(v_ids, s.run_id)]).outcome = 'completed'
                      AND s.run_id <> ALL (coalesce(v_ended, '{}')));
    IF v_late <> '{}' THEN
        -- Locks in the order the reaper and the claim take them, runs and
        -- then tasks; each statement reads what was committed before it
        -- started, so a claim that took the task while this call waited
        -- for its lock is seen by the next one.
        v_late := ARRAY(SELECT r.id FROM {{schema}}.runs r
                        WHERE r.id = ANY (v_late) AND r.state IN ('running', 'abandoned')
                          AND r.claim_token IS NOT DISTINCT FROM
                              coalesce((p_rows[array_position(v_ids, r.id)]).claim_token, r.claim_token)
                        ORDER BY r.id FOR UPDATE);
        PERFORM 1 FROM {{schema}}.tasks t
        WHERE t.id IN (SELECT r.task_id FROM {{schema}}.runs r WHERE r.id = ANY (v_late))
        ORDER BY t.id FOR UPDATE;
        WITH taken AS (
            UPDATE {{schema}}.runs r SET (state, finished_at, summary, exit_code, signal, output_tail, cpu_usec,
                                          memory_peak, log_error, result) = (
                SELECT 'completed', clock_timestamp(), (a.s).summary, (a.s).exit_code, (a.s).signal,
                       coalesce((a.s).output_tail, r.output_tail), (a.s).cpu_usec, (a.s).memory_peak,
                       (a.s).log_error, (a.s).result
                FROM (SELECT p_rows[array_position(v_ids, r.id)] AS s) a)
            FROM {{schema}}.runs o JOIN {{schema}}.tasks t ON t.id = o.task_id
            WHERE r.id = ANY (v_late) AND o.id = r.id
              -- An abandoned run counts only when it was abandoned after
              -- its lease ran out (reaped), not given up while it held it.
              AND (o.state = 'running'
                   OR o.state = 'abandoned' AND o.finished_at >= o.lease_expires_at AND t.state IN ('queued', 'failed'))
              AND NOT EXISTS (SELECT 1 FROM {{schema}}.runs n WHERE n.task_id = o.task_id AND n.id > o.id)
            RETURNING r.id, r.task_id, o.state AS was
        ),
        -- A reaped run's task was moved already: it is done now.
        done AS (
            UPDATE {{schema}}.tasks t SET (state, updated_at, finished_at) = ('done', clock_timestamp(), clock_timestamp())
            FROM taken k WHERE k.was = 'abandoned' AND t.id = k.task_id
        )
        -- A run still marked running moves its task as any completion does.
        SELECT coalesce(v_ended, '{}') || array_agg(k.id) FILTER (WHERE k.was = 'running'),
               coalesce(v_tasks, '{}') || array_agg(k.task_id) FILTER (WHERE k.was = 'running'),
               coalesce(v_outcomes, '{}') || array_agg('completed'::text) FILTER (WHERE k.was = 'running'),
               coalesce(v_retry, '{}') || array_agg(NULL::interval) FILTER (WHERE k.was = 'running'),
               coalesce(v_refunds, '{}') || array_agg(false) FILTER (WHERE k.was = 'running'),
               array_agg(k.id) FILTER (WHERE k.was = 'abandoned')
        INTO v_ended, v_tasks, v_outcomes, v_retry, v_refunds, v_reaped
        FROM taken k;
        v_ended := nullif(v_ended, '{}');
        -- A reaped run's task, done now: bring back what its failure
        -- cancelled, and wake what waits for it.
        IF v_reaped IS NOT NULL THEN
            PERFORM {{schema}}.chain_revive(ARRAY(SELECT r.task_id FROM {{schema}}.runs r WHERE r.id = ANY (v_reaped)));
        END IF;
    END IF;
    IF v_ended IS NOT NULL THEN
        PERFORM {{schema}}.finish_tasks(v_ended, v_tasks, v_outcomes, v_retry, v_refunds);
    END IF;
    -- New statements: they see the runs as this call left them.
    IF v_events THEN
        -- Each run that has the outcome settled here (this call's, or an
        -- earlier one's: 'ok' or 'same') records its event, once.
        INSERT INTO {{schema}}.events (task_id, run_id, event, agent)
        SELECT r.task_id, r.id, s.event, r.agent
        FROM unnest(p_rows) s JOIN {{schema}}.runs r ON r.id = s.run_id AND r.state = s.outcome
        WHERE s.event IS NOT NULL AND r.claim_token IS NOT DISTINCT FROM coalesce(s.claim_token, r.claim_token)
        ON CONFLICT (run_id, event) DO NOTHING;
    END IF;
    RETURN QUERY
    SELECT u.run_id,
           CASE WHEN u.first AND (u.run_id = ANY (v_ended) OR u.run_id = ANY (v_reaped)) THEN 'ok'
                WHEN r.id IS NULL OR r.claim_token IS DISTINCT FROM coalesce(u.claim_token, r.claim_token) THEN 'missing'
                WHEN r.state = u.outcome THEN 'same'
                ELSE 'lost' END
    FROM (
        SELECT s.run_id, s.outcome, s.claim_token, s.ordinality,
               row_number() OVER (PARTITION BY s.run_id ORDER BY s.ordinality) = 1 AS first
        FROM unnest(p_rows) WITH ORDINALITY AS s
    ) u
    LEFT JOIN {{schema}}.runs r ON r.id = u.run_id
    ORDER BY u.ordinality;
END $$;
