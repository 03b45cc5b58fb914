-- qd queue schema, version 22: chains. A task may wait for others
-- (task_deps, one row per task it waits for); while it waits its state is
-- 'waiting', which no claim takes, so the claim is unchanged. A run keeps
-- the result it completed with (runs.result, JSON text as the child wrote
-- it), which the settlement carries (settlement.result). A task its chain
-- cancelled says why (tasks.summary) and which task did it
-- (tasks.cancelled_by), for a retry of that task with its chain. The
-- dedupe key's index counts a waiting task as unfinished.
--
-- No floor line: a qd built for an older version would cancel a parent
-- without cancelling what waits for it, and retry a waiting task's chain
-- by queueing it at once, so it must not run on this schema.
ALTER TABLE {{schema}}.tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE {{schema}}.tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('waiting', 'queued', 'running', 'done', 'failed', 'cancelled'));
ALTER TABLE {{schema}}.tasks ADD COLUMN after_any boolean NOT NULL DEFAULT false;
ALTER TABLE {{schema}}.tasks ADD COLUMN summary text;
ALTER TABLE {{schema}}.tasks ADD COLUMN cancelled_by bigint;
ALTER TABLE {{schema}}.runs ADD COLUMN result text;
ALTER TYPE {{schema}}.settlement ADD ATTRIBUTE result text;

-- A task waits only for older tasks (they must exist when it is
-- enqueued), which the CHECK states: no cycle can be made.
CREATE TABLE {{schema}}.task_deps (
    task_id   bigint NOT NULL REFERENCES {{schema}}.tasks (id) ON DELETE CASCADE,
    parent_id bigint NOT NULL REFERENCES {{schema}}.tasks (id) ON DELETE CASCADE,
    PRIMARY KEY (task_id, parent_id),
    CHECK (parent_id < task_id)
);
-- What waits for a task that just finished.
CREATE INDEX task_deps_parent_idx ON {{schema}}.task_deps (parent_id);
-- The tasks a task's failure cancelled, for a retry of its chain.
CREATE INDEX tasks_cancelled_by_idx ON {{schema}}.tasks (cancelled_by)
    WHERE cancelled_by IS NOT NULL;

-- A waiting task is unfinished: its dedupe key is taken, as a queued
-- or running task's is (enqueue reads and infers this index).
DROP INDEX {{schema}}.tasks_dedupe_key_idx;
CREATE UNIQUE INDEX tasks_dedupe_key_idx ON {{schema}}.tasks (dedupe_key)
    WHERE state IN ('waiting', 'queued', 'running') AND dedupe_key IS NOT NULL;
