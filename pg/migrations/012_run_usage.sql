-- qd queue schema, version 12: a run records what its cgroup measured, the
-- CPU time of all its processes (microseconds) and their memory peak
-- (bytes). NULL where the run had no cgroup, or the cgroup no memory
-- controller. settle takes both as new last parameters
-- (functions/settle.sql); the old signature is dropped first.
ALTER TABLE {{schema}}.runs ADD COLUMN cpu_usec bigint, ADD COLUMN memory_peak bigint;
DROP FUNCTION IF EXISTS {{schema}}.settle(bigint[], text[], text[], int[], text[], text[], interval[], boolean[]);
