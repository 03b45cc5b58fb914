-- qd queue schema, version 14: the dashboard's run indexes carry what its
-- charts read (a run's outcome, task and attempt), so that a week of runs is
-- read from the indexes alone instead of from the table, row by row.
DROP INDEX {{schema}}.runs_started_at_idx;
CREATE INDEX runs_started_at_idx ON {{schema}}.runs (started_at) INCLUDE (task_id, attempt);
DROP INDEX {{schema}}.runs_finished_at_idx;
CREATE INDEX runs_finished_at_idx ON {{schema}}.runs (finished_at, started_at) INCLUDE (state)
    WHERE finished_at IS NOT NULL;
