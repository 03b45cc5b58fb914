-- defer_runs readies the settlements of a Settle call that defer their
-- task for settle_runs: p_caps is a JSON array of {"run_id", "max"}, one
-- per deferral. A deferral of a live run (state running, lease not run
-- out, claim token matching) whose task has deferred fewer than max times
-- counts one more on the task, marks the run deferred, and stays as it
-- is: abandoned, its attempt refunded, retry_in its delay. One whose task
-- has deferred max times already becomes the failure of the run, as a
-- failed exit would be (the attempt counted, the backoff, failed for good
-- when the attempts are used up). Any other row is returned unchanged, and
-- settle_runs answers it as it would have.
CREATE OR REPLACE FUNCTION {{schema}}.defer_runs(p_rows {{schema}}.settlement[], p_caps jsonb)
RETURNS {{schema}}.settlement[]
LANGUAGE plpgsql SET enable_seqscan = off AS $$
DECLARE
    v_out  {{schema}}.settlement[] := p_rows;
    v_cap  record;
    v_i    int;
    v_task bigint;
BEGIN
    FOR v_cap IN SELECT (c->>'run_id')::bigint AS run_id, (c->>'max')::int AS max
                 FROM jsonb_array_elements(p_caps) c LOOP
        v_i := array_position(ARRAY(SELECT s.run_id FROM unnest(p_rows) s), v_cap.run_id);
        CONTINUE WHEN v_i IS NULL;
        SELECT r.task_id INTO v_task FROM {{schema}}.runs r
        WHERE r.id = v_cap.run_id AND (r.state = 'running') IS TRUE AND r.lease_expires_at > clock_timestamp()
          AND r.claim_token IS NOT DISTINCT FROM coalesce(v_out[v_i].claim_token, r.claim_token);
        CONTINUE WHEN NOT FOUND;
        UPDATE {{schema}}.tasks t SET deferrals = t.deferrals + 1
        WHERE t.id = v_task AND t.deferrals < v_cap.max;
        IF FOUND THEN
            UPDATE {{schema}}.runs r SET deferred = true WHERE r.id = v_cap.run_id;
        ELSE
            v_out[v_i].outcome := 'failed';
            v_out[v_i].refund := false;
            v_out[v_i].retry_in := NULL;
            v_out[v_i].summary := v_out[v_i].summary || '; deferred ' || v_cap.max
                || ' times already, the most max_deferrals allows: failed instead';
        END IF;
    END LOOP;
    RETURN v_out;
END $$;
