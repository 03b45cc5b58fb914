-- qd queue schema, version 5: a lane records who set its limit and pause
-- last: `qd lane set`, or the lane block of a daemon's config (named with
-- the file and the daemon), so that qd lane list can say where each limit
-- came from. NULL: never set, the defaults.
ALTER TABLE {{schema}}.lanes ADD COLUMN set_by text;
