-- limit_units is how many units a limit has at p_now (negative when it
-- owes some), at most p_burst + 1: the floor of ((burst + 1) × emission -
-- how far its theoretical arrival time lies ahead) / emission, as
-- lease.LimitUnits computes it in Go (GCRA, docs/limits.md). In
-- microseconds, exact (numeric), so that a unit due exactly now is there;
-- bigint, since burst + 1 may pass the range of int.
CREATE OR REPLACE FUNCTION {{schema}}.limit_units(
    p_tat timestamptz, p_now timestamptz, p_emission interval, p_burst int) RETURNS bigint
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT least(p_burst::bigint + 1, floor(
        ((p_burst::numeric + 1) * (extract(epoch FROM p_emission) * 1000000)
         - extract(epoch FROM greatest(p_tat, p_now) - p_now) * 1000000)
        / (extract(epoch FROM p_emission) * 1000000)))::bigint
$$;
