-- qd queue schema, version 7: a task records the run that enqueued it (an
-- agent's follow-up tasks, enqueued through its daemon's socket), so that a
-- planner's fan-out can be followed. NULL: enqueued from outside a run.
-- enqueue takes it as a new last parameter (functions/enqueue.sql); the old
-- signature is dropped first, since a function's parameters cannot be
-- replaced in place.
ALTER TABLE {{schema}}.tasks ADD COLUMN parent_run bigint;
DROP FUNCTION IF EXISTS {{schema}}.enqueue(text, text, text, int, timestamptz, interval, int, text);
