-- claim takes up to p_n tasks in one transaction. It picks the lanes to
-- try, best task first, by the strategy that fits p_lanes, and claim_from
-- takes from them under each lane's lock. The caller must run it at READ
-- COMMITTED, so that each statement sees the claims it waited for.
--
-- Each strategy is a function of its own, so that each statement has one
-- fixed, index-searching plan. One candidate query with p_lanes IS NULL OR
-- ... filters would leave the planner two bad choices on every call: plan
-- again (0.2-0.4 ms) or keep a generic plan that scans every lane.
--
-- * one named lane: no candidate query at all; claim_from waits for the
--   lane's lock, since there is nothing else to do;
-- * several named lanes: claim_named, through the lanes key;
-- * any lane: claim_any, the lanes of the head of the queue and of expired
--   runs, every unpaused lane when that head was cut short.
--
-- A candidate list is cut at v_reach lanes with room, so that the live runs
-- of every lane are not counted on each call: enough that claimers racing
-- for the same best lanes find free ones behind them.
--
-- p_token names the claim; the client chooses it and sends the same token
-- again when it could not learn whether an earlier call committed (the
-- connection died around COMMIT). Every run a claim makes records it. A
-- claim first takes the token's advisory lock (so a retry waits for an
-- earlier call still in flight) and looks for runs with its token: when
-- there are any, that claim committed, and this call returns those of its
-- runs that are still live, claiming nothing. p_n = 0 only looks. The
-- tasks of a paused agent (agent_pauses) are never taken.
CREATE OR REPLACE FUNCTION {{schema}}.claim(
    p_lanes text[], p_agent text, p_owner text, p_instance text, p_lease interval, p_n int,
    p_token text)
RETURNS TABLE (task_id bigint, run_id bigint, lane text, agent text, attempt int,
               max_attempts int, priority int, payload text, lease_expires_at timestamptz,
               run_after timestamptz)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_reach int := greatest(p_n, 1) * 4 + 32;
    v_lanes text[] := p_lanes;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'qd claim must run at READ COMMITTED, not %', current_setting('transaction_isolation')
            USING ERRCODE = 'invalid_transaction_state';
    END IF;
    IF p_token IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock({{tokenspace}}, hashtext(p_token));
        -- A new statement after the lock: it sees an earlier call that
        -- committed while this one waited.
        IF EXISTS (SELECT FROM {{schema}}.runs r WHERE r.claim_token = p_token) THEN
            RETURN QUERY
            SELECT t.id, r.id, r.lane, r.agent, r.attempt, t.max_attempts, t.priority, t.payload_text, r.lease_expires_at,
                   t.run_after
            FROM {{schema}}.runs r JOIN {{schema}}.tasks t ON t.id = r.task_id
            WHERE r.claim_token = p_token AND r.owner = p_owner AND r.state = 'running'
              AND r.lease_expires_at > clock_timestamp()
            ORDER BY t.priority, t.run_after, t.id;
            RETURN;
        END IF;
    END IF;
    IF p_n < 1 OR cardinality(p_lanes) = 0 THEN
        RETURN;
    END IF;
    -- A paused agent: nothing to take. A claim of any agent leaves the
    -- tasks of paused ones in claim_from.
    IF p_agent IS NOT NULL AND EXISTS (SELECT FROM {{schema}}.agent_pauses a WHERE a.agent = p_agent) THEN
        RETURN;
    END IF;
    IF p_lanes IS NULL THEN
        v_lanes := {{schema}}.claim_any(p_agent, p_n, v_reach);
    ELSIF cardinality(p_lanes) > 1 THEN
        v_lanes := {{schema}}.claim_named(p_lanes, p_agent, v_reach);
    END IF;
    RETURN QUERY SELECT * FROM {{schema}}.claim_from(v_lanes, p_agent, p_owner, p_instance, p_lease, p_n, p_token);
END $$;
