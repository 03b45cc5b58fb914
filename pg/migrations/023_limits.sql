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

-- Budgets: what the runs of an agent may spend in each calendar period
-- (1h, 1d, 1w from Monday, 1mo, in timezone), in the unit they report.
-- Each report (qd usage) adds to its run's usage and, for an agent with a
-- budget, is a row of budget_usage; a period's total is the sum of its
-- rows. told_start is the start of the last period whose exhaustion was
-- recorded in events ('budget_exhausted', once per period), exhausted_at
-- when.
CREATE TABLE {{schema}}.budgets (
    name         text PRIMARY KEY CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    max          numeric NOT NULL CHECK (max >= 0),
    period       text NOT NULL CHECK (period IN ('1h', '1d', '1w', '1mo')),
    timezone     text NOT NULL DEFAULT 'UTC',
    agents       text[] NOT NULL DEFAULT '{}',
    set_by       text,
    updated_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    told_start   timestamptz,
    exhausted_at timestamptz
);
CREATE TABLE {{schema}}.budget_usage (
    id     bigserial PRIMARY KEY,
    budget text NOT NULL,
    run_id bigint,
    amount numeric NOT NULL CHECK (amount >= 0),
    note   text,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX budget_usage_budget_at_idx ON {{schema}}.budget_usage (budget, at) INCLUDE (amount);
ALTER TABLE {{schema}}.runs ADD COLUMN usage numeric, ADD COLUMN usage_note text;
ALTER TABLE {{schema}}.events DROP CONSTRAINT events_event_check,
    ADD CONSTRAINT events_event_check CHECK (event IN ('failed', 'timeout', 'stall', 'lease_lost', 'budget_exhausted'));
