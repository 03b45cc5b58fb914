-- record_usage adds p_amount to run p_run's usage (and keeps p_note as its
-- note when given) and, with p_budget, records it in that budget's
-- budget_usage under the budget's row lock. When the period's total
-- reaches the budget's max and the period's exhaustion is not recorded
-- yet (told_start), it records it: told_start, exhausted_at, and the
-- run's 'budget_exhausted' event, once per budget and period however many
-- callers race. An unknown run or budget is no_data_found.
CREATE OR REPLACE FUNCTION {{schema}}.record_usage(p_run bigint, p_budget text, p_amount numeric, p_note text)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_run    record;
    v_budget record;
BEGIN
    UPDATE {{schema}}.runs r SET usage = coalesce(r.usage, 0) + p_amount, usage_note = coalesce(p_note, r.usage_note)
    WHERE r.id = p_run RETURNING r.task_id, r.agent INTO v_run;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'run % does not exist', p_run USING ERRCODE = 'no_data_found';
    END IF;
    IF p_budget IS NULL THEN
        RETURN;
    END IF;
    SELECT b.name, b.max, b.told_start, p.start, p.next INTO v_budget
    FROM {{schema}}.budgets b CROSS JOIN LATERAL {{schema}}.budget_period(b.period, b.timezone, clock_timestamp()) p
    WHERE b.name = p_budget FOR UPDATE OF b;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'budget "%" is not declared', p_budget USING ERRCODE = 'no_data_found';
    END IF;
    INSERT INTO {{schema}}.budget_usage (budget, run_id, amount, note) VALUES (p_budget, p_run, p_amount, p_note);
    IF v_budget.told_start IS DISTINCT FROM v_budget.start
       AND {{schema}}.budget_spent(p_budget, v_budget.start, v_budget.next) >= v_budget.max THEN
        UPDATE {{schema}}.budgets b SET told_start = v_budget.start, exhausted_at = clock_timestamp() WHERE b.name = p_budget;
        INSERT INTO {{schema}}.events (task_id, run_id, event, agent)
        VALUES (v_run.task_id, p_run, 'budget_exhausted', v_run.agent)
        ON CONFLICT (run_id, event) DO NOTHING;
    END IF;
END $$;
