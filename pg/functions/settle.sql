-- settle ends runs, each fenced on its own: a run still live ends with its
-- outcome; one already ended with the same outcome answers 'same' (a
-- retried settlement whose commit reply was lost); any other answers
-- 'lost', and an unknown id 'missing', as does a run made by another claim
-- than the settlement's token says (its id was given out again by a
-- database that lost the run); a NULL token is not checked. p_cpu_usec and
-- p_memory_peaks are what the run's cgroup measured, NULL where it measured
-- nothing.
CREATE OR REPLACE FUNCTION {{schema}}.settle(
    p_ids bigint[], p_outcomes text[], p_summaries text[], p_exit_codes int[],
    p_signals text[], p_tails text[], p_retry_in interval[], p_refunds boolean[],
    p_cpu_usec bigint[], p_memory_peaks bigint[], p_tokens text[])
RETURNS TABLE (run_id bigint, status text)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    i       int;
    v_task  bigint;
    v_state text;
    v_token text;
BEGIN
    FOR i IN 1 .. coalesce(cardinality(p_ids), 0) LOOP
        UPDATE {{schema}}.runs r SET
            state = p_outcomes[i],
            finished_at = clock_timestamp(),
            summary = p_summaries[i],
            exit_code = p_exit_codes[i],
            signal = p_signals[i],
            output_tail = coalesce(p_tails[i], r.output_tail),
            cpu_usec = p_cpu_usec[i],
            memory_peak = p_memory_peaks[i]
        WHERE r.id = p_ids[i] AND r.state = 'running' AND r.lease_expires_at > clock_timestamp()
          AND (p_tokens[i] IS NULL OR r.claim_token IS NOT DISTINCT FROM p_tokens[i])
        RETURNING r.task_id INTO v_task;
        IF FOUND THEN
            PERFORM {{schema}}.finish_task(v_task, p_outcomes[i], p_retry_in[i], p_refunds[i]);
            run_id := p_ids[i]; status := 'ok';
        ELSE
            SELECT r.state, r.claim_token INTO v_state, v_token FROM {{schema}}.runs r WHERE r.id = p_ids[i];
            run_id := p_ids[i];
            status := CASE WHEN v_state IS NULL THEN 'missing'
                           WHEN p_tokens[i] IS NOT NULL AND v_token IS DISTINCT FROM p_tokens[i] THEN 'missing'
                           WHEN v_state = p_outcomes[i] THEN 'same'
                           ELSE 'lost' END;
        END IF;
        RETURN NEXT;
    END LOOP;
END $$;
