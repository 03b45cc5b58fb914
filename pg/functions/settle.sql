-- settle ends runs, each fenced on its own: a run still live ends with its
-- outcome; one already ended with the same outcome answers 'same' (a
-- retried settlement whose commit reply was lost); any other answers
-- 'lost', and an unknown id 'missing', as does a run made by another claim
-- than the settlement's token says (its id was given out again by a
-- database that lost the run); a NULL token is not checked. p_cpu_usec and
-- p_memory_peaks are what the run's cgroup measured, NULL where it measured
-- nothing. A run named twice is settled by its first settlement; the later
-- ones answer as a retry would.
--
-- Set-based: one statement ends every live run of the call (in id order,
-- the order of the primary key it reads them by), one moves their
-- tasks, one answers. A statement's start is most of its cost for a row or
-- two, so a call of 8 runs costs about what a call of one did when each
-- run took its own statements. The plans are generic (one per session):
-- left to choose, the plan cache kept planning each call again, since a
-- generic plan counts on arrays of 10 and a call of one run costs less,
-- and planning a call cost more than running it (0.55 ms against 0.12 ms
-- for a call of one run).
CREATE OR REPLACE FUNCTION {{schema}}.settle(
    p_ids bigint[], p_outcomes text[], p_summaries text[], p_exit_codes int[],
    p_signals text[], p_tails text[], p_retry_in interval[], p_refunds boolean[],
    p_cpu_usec bigint[], p_memory_peaks bigint[], p_tokens text[])
RETURNS TABLE (run_id bigint, status text)
LANGUAGE plpgsql SET enable_seqscan = off SET plan_cache_mode = force_generic_plan AS $$
#variable_conflict use_column
DECLARE
    v_ended    bigint[];
    v_tasks    bigint[];
    v_outcomes text[];
    v_retry    interval[];
    v_refunds  boolean[];
BEGIN
    WITH ended AS (
        -- By id = ANY, never by a join, for the reason finish_tasks gives;
        -- array_position finds a run's first settlement.
        UPDATE {{schema}}.runs r SET (state, finished_at, summary, exit_code, signal, output_tail, cpu_usec,
                                      memory_peak) = (
            SELECT p_outcomes[a.k], clock_timestamp(), p_summaries[a.k], p_exit_codes[a.k], p_signals[a.k],
                   coalesce(p_tails[a.k], r.output_tail), p_cpu_usec[a.k], p_memory_peaks[a.k]
            FROM (SELECT array_position(p_ids, r.id) AS k) a)
        WHERE r.id = ANY (p_ids) AND (r.state = 'running') IS TRUE AND r.lease_expires_at > clock_timestamp()
          AND (p_tokens[array_position(p_ids, r.id)] IS NULL
               OR r.claim_token IS NOT DISTINCT FROM p_tokens[array_position(p_ids, r.id)])
        RETURNING r.id, r.task_id, r.state AS outcome, p_retry_in[array_position(p_ids, r.id)] AS retry_in,
                  p_refunds[array_position(p_ids, r.id)] AS refund
    )
    SELECT array_agg(e.id), array_agg(e.task_id), array_agg(e.outcome), array_agg(e.retry_in), array_agg(e.refund)
    INTO v_ended, v_tasks, v_outcomes, v_retry, v_refunds
    FROM ended e;
    IF v_ended IS NOT NULL THEN
        PERFORM {{schema}}.finish_tasks(v_ended, v_tasks, v_outcomes, v_retry, v_refunds);
    END IF;
    -- A new statement: it sees the runs as this call left them.
    RETURN QUERY
    SELECT u.id,
           CASE WHEN u.first AND u.id = ANY (v_ended) THEN 'ok'
                ELSE coalesce((
                    SELECT CASE WHEN u.token IS NOT NULL AND r.claim_token IS DISTINCT FROM u.token THEN 'missing'
                                WHEN r.state = u.outcome THEN 'same'
                                ELSE 'lost' END
                    FROM {{schema}}.runs r WHERE r.id = u.id), 'missing') END
    FROM (
        SELECT v.id, v.outcome, v.token, v.ord, row_number() OVER (PARTITION BY v.id ORDER BY v.ord) = 1 AS first
        FROM unnest(p_ids, p_outcomes, p_tokens) WITH ORDINALITY AS v(id, outcome, token, ord)
    ) u
    ORDER BY u.ord;
END $$;
