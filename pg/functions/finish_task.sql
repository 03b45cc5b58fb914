-- finish_task moves the task of a run that just ended with outcome.
-- A cancel request wins over a retry; a failed attempt waits retry_in
-- (or the backoff); an abandoned one waits retry_in when given (a timeout
-- or a stall: the agent's own doing), else is claimable at once; refund
-- gives the attempt back.
CREATE OR REPLACE FUNCTION {{schema}}.finish_task(p_task bigint, p_outcome text, p_retry_in interval, p_refund boolean)
RETURNS void LANGUAGE plpgsql SET enable_seqscan = off AS $$
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
            WHEN p_outcome = 'abandoned' THEN v_now + coalesce(p_retry_in, interval '0')
            ELSE t.run_after END,
        updated_at = v_now
    WHERE t.id = p_task AND t.state = 'running';
    UPDATE {{schema}}.tasks t SET finished_at = v_now
    WHERE t.id = p_task AND t.state IN ('done', 'failed', 'cancelled') AND t.finished_at IS NULL;
END $$;
