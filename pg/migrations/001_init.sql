-- qd queue schema, version 1: the tables and their indexes. {{schema}} is
-- replaced by the quoted schema name before this runs. Table and column
-- names are a public contract: operators query them with psql.
--
-- Version 1 also created the functions lane_key, backoff, finish_task,
-- reap_lane, claim, heartbeat, settle, abandon_owner and enqueue. Their
-- current definitions are in functions/, one file each, and Migrate
-- recreates them after it applies migrations.

CREATE TABLE {{schema}}.lanes (
    name        text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    max_running int NOT NULL DEFAULT 1 CHECK (max_running >= 1),
    paused      boolean NOT NULL DEFAULT false,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE {{schema}}.tasks (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane             text NOT NULL REFERENCES {{schema}}.lanes (name),
    agent            text NOT NULL,
    payload          jsonb NOT NULL,
    -- The exact text enqueued: jsonb normalises whitespace and key order,
    -- and agents receive the payload byte for byte.
    payload_text     text NOT NULL,
    priority         int NOT NULL DEFAULT 0,
    run_after        timestamptz NOT NULL DEFAULT clock_timestamp(),
    attempts         int NOT NULL DEFAULT 0,
    max_attempts     int NOT NULL,
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    dedupe_key       text,
    cancel_requested boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    finished_at      timestamptz
) WITH (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- A note on the partial indexes below. Under the generic plans of prepared
-- statements (pgx and plpgsql both prepare), and with statistics taken
-- while few runs were live, the planner rates every small partial index as
-- nearly free, and will walk one whose predicate a statement merely
-- implies: a fenced update by id that says state = 'running' would scan
-- every live run. So each predicate also names its key column (IS NOT
-- NULL, always true for these rows), which only statements filtering on
-- that column imply.

-- Eligibility: the best queued task of a lane is the first entry.
CREATE INDEX tasks_eligible_idx ON {{schema}}.tasks (lane, priority, run_after, id)
    WHERE state = 'queued';
-- One unfinished task per dedupe key.
CREATE UNIQUE INDEX tasks_dedupe_key_idx ON {{schema}}.tasks (dedupe_key)
    WHERE state IN ('queued', 'running') AND dedupe_key IS NOT NULL;
-- Prune finds old finished tasks.
CREATE INDEX tasks_finished_at_idx ON {{schema}}.tasks (finished_at)
    WHERE finished_at IS NOT NULL;

-- Heartbeats rewrite lease_expires_at, last_heartbeat_at, pid and
-- last_output_at many times a minute. None of them is indexed, so those
-- updates are HOT (no index writes, no index bloat); fillfactor leaves the
-- page room they need.
CREATE TABLE {{schema}}.runs (
    id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    task_id           bigint NOT NULL REFERENCES {{schema}}.tasks (id) ON DELETE CASCADE,
    lane              text NOT NULL,
    agent             text NOT NULL,
    attempt           int NOT NULL,
    owner             text NOT NULL,
    instance          text NOT NULL DEFAULT '',
    state             text NOT NULL DEFAULT 'running'
                      CHECK (state IN ('running', 'completed', 'failed', 'abandoned', 'cancelled')),
    pid               int,
    started_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    lease_expires_at  timestamptz NOT NULL,
    last_output_at    timestamptz,
    finished_at       timestamptz,
    exit_code         int,
    signal            text,
    summary           text,
    output_tail       text
) WITH (
    fillfactor = 70,
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.05,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);

-- Live runs of a lane: the reap and the lane count read only these.
CREATE INDEX runs_running_lane_idx ON {{schema}}.runs (lane)
    WHERE state = 'running' AND lane IS NOT NULL;
CREATE INDEX runs_task_id_idx ON {{schema}}.runs (task_id);
-- A restarted daemon abandons its previous incarnation's runs through this.
CREATE INDEX runs_running_owner_idx ON {{schema}}.runs (owner)
    WHERE state = 'running' AND owner IS NOT NULL;

CREATE TABLE {{schema}}.periodic (
    name      text PRIMARY KEY,
    last_tick timestamptz
);
