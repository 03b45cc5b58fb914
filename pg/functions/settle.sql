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
-- the order every writer of several runs locks them in), one moves their
-- tasks, one answers. A statement's start is most of its cost for a row or
-- two, so a call of 8 runs costs about what a call of one did when each
-- run took its own statements.
CREATE OR REPLACE FUNCTION {{schema}}.settle(
    p_ids bigint[], p_outcomes text[], p_summaries text[], p_exit_codes int[],
    p_signals text[], p_tails text[], p_retry_in interval[], p_refunds boolean[],
    p_cpu_usec bigint[], p_memory_peaks bigint[], p_tokens text[])
RETURNS TABLE (run_id bigint, status text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_ended    bigint[];
    v_tasks    bigint[];
    v_outcomes text[];
    v_retry    interval[];
    v_refunds  boolean[];
BEGIN
    WITH x AS (
        SELECT DISTINCT ON (u.id) u.*
        FROM unnest(p_ids, p_outcomes, p_summaries, p_exit_codes, p_signals, p_tails, p_retry_in, p_refunds,
                    p_cpu_usec, p_memory_peaks, p_tokens)
             WITH ORDINALITY AS u(id, outcome, summary, exit_code, signal, tail, retry_in, refund, cpu, peak, token, ord)
        ORDER BY u.id, u.ord
    ), ended AS (
        UPDATE {{schema}}.runs r SET
            state = x.outcome,
            finished_at = clock_timestamp(),
            summary = x.summary,
            exit_code = x.exit_code,
            signal = x.signal,
            output_tail = coalesce(x.tail, r.output_tail),
            cpu_usec = x.cpu,
            memory_peak = x.peak
        FROM x
        WHERE r.id = x.id AND r.state = 'running' AND r.lease_expires_at > clock_timestamp()
          AND (x.token IS NULL OR r.claim_token IS NOT DISTINCT FROM x.token)
        RETURNING r.id, r.task_id, x.outcome, x.retry_in, x.refund
    )
    SELECT array_agg(e.id), array_agg(e.task_id), array_agg(e.outcome), array_agg(e.retry_in), array_agg(e.refund)
    INTO v_ended, v_tasks, v_outcomes, v_retry, v_refunds
    FROM ended e;
    IF v_ended IS NOT NULL THEN
        PERFORM {{schema}}.finish_tasks(v_tasks, v_outcomes, v_retry, v_refunds);
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
