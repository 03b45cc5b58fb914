-- settle is the settlement call of a qd built for schema version 16, 17
-- or 18, which passes its settlements as eleven parallel arrays (and
-- writes log_error and events in statements of its own): it hands them to
-- settle_runs as rows. qd since version 19 calls settle_runs; settle goes
-- with the migration that raises the floor past 18. plpgsql, for the
-- plan it keeps (see finish_tasks).
CREATE OR REPLACE FUNCTION {{schema}}.settle(
    p_ids bigint[], p_outcomes text[], p_summaries text[], p_exit_codes int[],
    p_signals text[], p_tails text[], p_retry_in interval[], p_refunds boolean[],
    p_cpu_usec bigint[], p_memory_peaks bigint[], p_tokens text[])
RETURNS TABLE (run_id bigint, status text) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY
    SELECT s.run_id, s.status FROM {{schema}}.settle_runs(ARRAY(
        SELECT ROW(x.id, x.token, x.outcome, x.summary, x.exit_code, x.signal, x.tail, x.retry_in, x.refund, x.cpu,
                   x.peak, NULL, NULL, NULL)::{{schema}}.settlement
        FROM unnest(p_ids, p_tokens, p_outcomes, p_summaries, p_exit_codes, p_signals, p_tails, p_retry_in, p_refunds,
                    p_cpu_usec, p_memory_peaks) WITH ORDINALITY
             AS x(id, token, outcome, summary, exit_code, signal, tail, retry_in, refund, cpu, peak, ord)
        ORDER BY x.ord)) s;
END $$;
