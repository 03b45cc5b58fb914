-- qd queue schema, version 4: a restarted daemon abandons only the runs of
-- the earlier incarnations it proved gone, daemons register their name, and
-- a run records why its log file is incomplete.
--
-- abandon_owner used to abandon every running run of an owner held by any
-- other instance, which also took the live runs of a second daemon started
-- with the same name. It now takes the instances to abandon, each one read
-- from the state directory of the daemon that is restarting, under a file
-- lock that died with the process that wrote it. The old signature goes
-- here; Migrate creates the new one with the other functions. IF EXISTS:
-- a fresh schema never had the old one, since Migrate creates functions
-- only after the last migration.
DROP FUNCTION IF EXISTS {{schema}}.abandon_owner(text, text, text);

-- One row per daemon name that is in use: who holds it, and when it last
-- said so. A daemon refuses to start with a name another living daemon
-- holds; see docs/service.md.
CREATE TABLE {{schema}}.daemons (
    name       text PRIMARY KEY,
    instance   text NOT NULL,
    host       text NOT NULL,
    pid        int NOT NULL,
    boot_id    text NOT NULL DEFAULT '',
    proc_start bigint NOT NULL DEFAULT 0,
    state_dir  text NOT NULL DEFAULT '',
    socket     text NOT NULL DEFAULT '',
    version    text NOT NULL DEFAULT '',
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    seen_at    timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- Why the run's log file lacks output (a full state disk, say); NULL when
-- the file holds all of it. qd logs then shows the stored output tail.
ALTER TABLE {{schema}}.runs ADD COLUMN log_error text;
