-- qd queue schema, version 8: the notifications sent about runs (a task
-- failed for good, a run timed out, stalled or lost its lease): one row per
-- run, event and target, claimed by the daemon that sends it, so that an
-- event is told once however many daemons share the queue, and so that
-- qd show can say who was told what, when, and how it went.
CREATE TABLE {{schema}}.notifications (
    id          bigserial PRIMARY KEY,
    task_id     bigint NOT NULL,
    run_id      bigint NOT NULL,
    event       text NOT NULL,
    target      text NOT NULL,
    status      text NOT NULL DEFAULT 'sending' CHECK (status IN ('sending', 'sent', 'failed')),
    detail      text NOT NULL DEFAULT '',
    sent_by     text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at timestamptz,
    UNIQUE (run_id, event, target)
);
CREATE INDEX notifications_task_id_idx ON {{schema}}.notifications (task_id);
