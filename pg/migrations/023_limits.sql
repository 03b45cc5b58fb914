-- qd queue schema, version 23: rate limits that every claimer shares
-- (docs/limits.md). A limit admits Rate units per Per, plus Burst, by
-- GCRA: tat is its theoretical arrival time and emission the time one
-- unit stands for (Per/Rate rounded up to the microsecond, written by
-- SetLimit). claim_limited takes one unit for each run it makes in the
-- claim's transaction, under the limit's row lock, and spend takes units
-- after the fact. No floor line: a qd that does not know limits would
-- claim past them, so it must not run on this schema.
CREATE TABLE {{schema}}.limits (
    name       text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    rate       int NOT NULL CHECK (rate > 0),
    per        interval NOT NULL CHECK (per > interval '0'),
    emission   interval NOT NULL CHECK (emission > interval '0'),
    burst      int NOT NULL DEFAULT 0 CHECK (burst >= 0),
    tat        timestamptz NOT NULL DEFAULT '-infinity',
    agents     text[] NOT NULL DEFAULT '{}',
    set_by     text,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- A run may defer its task (try later without losing an attempt): the run
-- is abandoned with its attempt refunded and marked deferred, and the
-- task counts its deferrals, which the agent's max_deferrals caps
-- (functions/defer_runs.sql).
ALTER TABLE {{schema}}.tasks ADD COLUMN deferrals int NOT NULL DEFAULT 0;
ALTER TABLE {{schema}}.runs ADD COLUMN deferred boolean NOT NULL DEFAULT false;
