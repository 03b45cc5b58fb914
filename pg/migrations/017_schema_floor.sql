-- qd queue schema, version 17: each version records its floor, the oldest
-- schema version a qd may be built for and still run on a schema at this
-- version. A qd refuses to start on a schema whose versions past its own
-- have a floor above it, naming both versions, instead of calling functions
-- it does not know (pg/doc.go, "Versions side by side"). This version only
-- adds the column, so a qd built for version 16 runs on it unchanged.
-- floor: 16
ALTER TABLE {{schema}}.schema_migrations ADD COLUMN IF NOT EXISTS floor int;
UPDATE {{schema}}.schema_migrations SET floor = version WHERE floor IS NULL;
