-- qd queue schema, version 15: an any-lane claim finds its lanes at the
-- head of the queue instead of visiting every lane, through an index of the
-- queued tasks in claim order, and one of each agent's; claim also returns
-- each task's run_after (the start of its wait), so the daemon need not
-- read it back. The changed result drops the old function first.
--
-- Both predicates name priority (IS NOT NULL, true of every row) for the
-- reason given in 001_init.sql: a claim of one lane orders by priority
-- too, and under a generic plan would walk the whole head filtering on
-- the lane; it never says priority IS NOT NULL, so it cannot use these.
CREATE INDEX tasks_head_idx ON {{schema}}.tasks (priority, run_after, id)
    WHERE state = 'queued' AND priority IS NOT NULL;
CREATE INDEX tasks_agent_head_idx ON {{schema}}.tasks (agent, priority, run_after, id)
    WHERE state = 'queued' AND priority IS NOT NULL;
DROP FUNCTION IF EXISTS {{schema}}.claim(text[], text, text, text, interval, int, text);
