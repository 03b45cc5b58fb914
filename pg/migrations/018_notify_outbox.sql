-- qd queue schema, version 18: notifications are recorded before they are
-- sent, and sent from the database.
--
-- events is the outbox: what is worth telling, one row per run and event,
-- written where it happens. finish_tasks writes 'failed' in the
-- transaction that fails a task for good (a settlement, a reap by any
-- claimer, abandon_owner), so a task cannot end failed untold; the daemon
-- writes what only it saw (a timeout or a stall with its settlement, a
-- lost lease after it). A daemon that tells the event's agent takes it
-- (taken_at), in the same transaction making its notifications, one per
-- target. finish_tasks now takes the runs as well as their tasks, so its
-- old signature goes.
--
-- notifications gains what sending from the table needs: tries, and
-- due_at, when a pending row is tried next or a sending row's claim (its
-- sender's lease) runs out; NULL once it is sent or failed for good, and
-- for the rows of older versions, which sent their own. Its default
-- status stays 'sending', so an older qd's row is never sent again.
--
-- A qd built for version 16 or 17 runs on this schema unchanged: it calls
-- settle, claim and abandon_owner, whose signatures stay, never
-- finish_tasks itself, and writes notifications as it did (its rows keep
-- due_at NULL, so no newer daemon sends them again). It tells from memory
-- what it sees; a newer daemon tells the same event once more only where
-- the two name a target differently (a webhook, now redacted).
-- floor: 16
CREATE TABLE {{schema}}.events (
    id         bigserial PRIMARY KEY,
    task_id    bigint NOT NULL,
    run_id     bigint NOT NULL,
    event      text NOT NULL CHECK (event IN ('failed', 'timeout', 'stall', 'lease_lost')),
    agent      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    taken_by   text,
    taken_at   timestamptz,
    UNIQUE (run_id, event)
);
CREATE INDEX events_untaken_idx ON {{schema}}.events (agent, id) WHERE taken_at IS NULL;
CREATE INDEX events_task_id_idx ON {{schema}}.events (task_id);
ALTER TABLE {{schema}}.notifications
    ADD COLUMN tries int NOT NULL DEFAULT 0,
    ADD COLUMN due_at timestamptz,
    DROP CONSTRAINT notifications_status_check,
    ADD CONSTRAINT notifications_status_check CHECK (status IN ('pending', 'sending', 'sent', 'failed'));
CREATE INDEX notifications_due_idx ON {{schema}}.notifications (target, due_at) WHERE due_at IS NOT NULL;
DROP FUNCTION IF EXISTS {{schema}}.finish_tasks(bigint[], text[], interval[], boolean[]);
