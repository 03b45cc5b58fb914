-- claim_head returns the head of the queue: its first p_limit queued tasks
-- in claim order, of agent p_agent (any agent when NULL), due or not (so
-- that the read is bounded however many wait for their time). It is the
-- one place where the two cases differ, each reading an index of its own
-- (tasks_head_idx, tasks_agent_head_idx): a statement with p_agent IS NULL
-- OR ... could use neither under its generic plan. STABLE: it reads with
-- the snapshot of the statement that calls it. claim_any is its one
-- caller, and its plans are made under claim_any's settings, as
-- claim_from's are under claim's.
CREATE OR REPLACE FUNCTION {{schema}}.claim_head(p_agent text, p_limit int)
RETURNS TABLE (lane text, priority int, run_after timestamptz, id bigint)
LANGUAGE plpgsql STABLE ROWS 100 AS $$
#variable_conflict use_column
BEGIN
    IF p_agent IS NULL THEN
        RETURN QUERY
        SELECT t.lane, t.priority, t.run_after, t.id FROM {{schema}}.tasks t
        WHERE t.state = 'queued' AND t.priority IS NOT NULL
        ORDER BY t.priority, t.run_after, t.id LIMIT p_limit;
    ELSE
        RETURN QUERY
        SELECT t.lane, t.priority, t.run_after, t.id FROM {{schema}}.tasks t
        WHERE t.state = 'queued' AND t.priority IS NOT NULL AND t.agent = p_agent
        ORDER BY t.priority, t.run_after, t.id LIMIT p_limit;
    END IF;
END $$;
