-- qd queue schema, version 16: a settlement is set-based. settle ends all
-- the runs of a call in one statement and moves their tasks in one more
-- (functions/finish_tasks.sql, which reap_lane and abandon_owner call too),
-- where it made two statements per run and wrote each finished task twice
-- (its state, then its finished_at: two row versions, each with an entry
-- in every index). finish_tasks takes arrays, so finish_task goes.
DROP FUNCTION IF EXISTS {{schema}}.finish_task(bigint, text, interval, boolean);
