-- qd queue schema, version 9: a daemon's row names the agents it runs, so
-- that qd status can warn of queued tasks whose agent no living daemon
-- runs (they would wait forever).
ALTER TABLE {{schema}}.daemons ADD COLUMN agents text[] NOT NULL DEFAULT '{}';
