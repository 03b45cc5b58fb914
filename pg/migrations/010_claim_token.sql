-- qd queue schema, version 10: each claim carries a token its client chose,
-- recorded on the runs it made, so that a client that lost the claim's
-- COMMIT reply can ask again with the same token and be given those runs
-- instead of claiming (and spending an attempt) a second time. NULL on runs
-- made before this version. claim takes the token as a new last parameter
-- (functions/claim.sql), so the old signature is dropped first.
ALTER TABLE {{schema}}.runs ADD COLUMN claim_token text;
CREATE INDEX runs_claim_token_idx ON {{schema}}.runs (claim_token)
    WHERE claim_token IS NOT NULL;
DROP FUNCTION IF EXISTS {{schema}}.claim(text[], text, text, text, interval, int);
