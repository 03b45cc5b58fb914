-- qd queue schema, version 13: heartbeat and settle take the claim token of
-- each run as a new last parameter (functions/heartbeat.sql,
-- functions/settle.sql) and are fenced on it as well as on the run id: a
-- database that lost runs (a failover to a copy a few seconds behind) gives
-- their ids out again, and a beat or a settlement of the lost run must not
-- land on the new one. The old signatures are dropped first.
DROP FUNCTION IF EXISTS {{schema}}.heartbeat(bigint[], interval[], int[], timestamptz[]);
DROP FUNCTION IF EXISTS {{schema}}.settle(bigint[], text[], text[], int[], text[], text[], interval[], boolean[], bigint[], bigint[]);
