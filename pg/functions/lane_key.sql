-- lane_key is the advisory lock key of a lane: the first 32 bits of the
-- md5 of its name, as a signed integer, as pg.LaneKey computes it in Go.
-- It must never change: daemons of different versions exclude each other
-- only while they agree on it.
CREATE OR REPLACE FUNCTION {{schema}}.lane_key(name text) RETURNS int
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $$ SELECT ('x' || substr(md5(name), 1, 8))::bit(32)::int $$;
