-- claim_limited is claim for a claim that names rate limits or a budget:
-- each run it makes takes one unit of each of p_limits, in the claim's
-- transaction, and none is made while budget p_budget's period has spent
-- its max.
-- It locks the limits' rows (in name order, so that two claimers never
-- wait on each other crosswise), which queues every claimer of a limit
-- behind the one in flight; counts the units each has now (limit_units);
-- claims at most as many tasks as the scarcest has, through claim; and
-- moves each limit's theoretical arrival time on by one emission per run
-- made (GCRA: tat = greatest(tat, now) + runs × emission).
--
-- When a limit has no unit, it claims nothing and returns one row whose
-- task columns are NULL and whose held_by, held_until and held_for name
-- the limit and when its next unit is due (tat - burst × emission), so
-- that the claimer can sleep until then. A token that already made runs
-- is a retry: claim returns those runs and no unit is taken again (the
-- first call took them, in its transaction). A limit or budget that does
-- not exist is an error, no_data_found.
--
-- A budget whose period has spent its max holds the claim back the same
-- way, before any limit is counted: held_by names it, held_spent and
-- held_max are set (NULL for a limit), held_until is the next period's
-- start. Its row is not locked: a report that lands while the claim runs
-- is counted by the next claim (runs in flight finish, docs/limits.md).
CREATE OR REPLACE FUNCTION {{schema}}.claim_limited(
    p_limits text[], p_budget text, p_lanes text[], p_agent text, p_owner text, p_instance text, p_lease interval,
    p_n int, p_token text)
RETURNS TABLE (task_id bigint, run_id bigint, lane text, agent text, attempt int,
               max_attempts int, priority int, payload text, lease_expires_at timestamptz,
               run_after timestamptz, held_by text, held_until timestamptz, held_for interval,
               held_spent numeric, held_max numeric)
LANGUAGE plpgsql SET enable_seqscan = off AS $$
#variable_conflict use_column
DECLARE
    v_now     timestamptz;
    v_got     int;
    v_units   bigint;
    v_u       bigint;
    v_row     {{schema}}.limits;
    v_rows    {{schema}}.limits[] := '{}';
    v_budget  record;
BEGIN
    -- One statement locks the limits' rows and reads them as they are once
    -- locked (a row updated by the claim it waited for is read again).
    FOR v_row IN SELECT l.* FROM {{schema}}.limits l
                 WHERE l.name = ANY (p_limits) ORDER BY l.name FOR UPDATE LOOP
        v_rows := v_rows || v_row; -- counted once the clock is read, after every lock
    END LOOP;
    IF cardinality(v_rows) < cardinality(p_limits) THEN
        RAISE EXCEPTION 'limit "%" is not declared: add a limit block to a daemon''s config, or run qd limit set',
            (SELECT x.name FROM unnest(p_limits) x(name)
             WHERE NOT EXISTS (SELECT FROM {{schema}}.limits l WHERE l.name = x.name) LIMIT 1)
            USING ERRCODE = 'no_data_found';
    END IF;
    IF p_token IS NOT NULL AND EXISTS (SELECT FROM {{schema}}.runs r WHERE r.claim_token = p_token) THEN
        RETURN QUERY SELECT c.*, NULL::text, NULL::timestamptz, NULL::interval, NULL::numeric, NULL::numeric
        FROM {{schema}}.claim(p_lanes, p_agent, p_owner, p_instance, p_lease, p_n, p_token) c;
        RETURN;
    END IF;
    -- A new statement after the locks: it sees every claim it waited for.
    v_now := clock_timestamp();
    IF p_budget IS NOT NULL THEN
        SELECT b.name, b.max, p.next, {{schema}}.budget_spent(b.name, p.start, p.next) AS spent INTO v_budget
        FROM {{schema}}.budgets b CROSS JOIN LATERAL {{schema}}.budget_period(b.period, b.timezone, v_now) p
        WHERE b.name = p_budget;
        IF NOT FOUND THEN
            RAISE EXCEPTION 'budget "%" is not declared: add a budget block to a daemon''s config, or run qd budget set', p_budget
                USING ERRCODE = 'no_data_found';
        END IF;
        IF v_budget.spent >= v_budget.max THEN
            task_id := NULL; held_by := p_budget; held_until := v_budget.next; held_for := v_budget.next - v_now;
            held_spent := v_budget.spent; held_max := v_budget.max;
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    -- The scarcest limit says how many runs may be made; a limit with no
    -- unit holds the claim back until the latest such limit's next unit.
    FOREACH v_row IN ARRAY v_rows LOOP
        v_u := {{schema}}.limit_units(v_row.tat, v_now, v_row.emission, v_row.burst);
        v_units := least(v_units, v_u);
        IF v_u < 1 AND (held_by IS NULL OR v_row.tat - v_row.burst * v_row.emission > held_until) THEN
            held_by := v_row.name; held_until := v_row.tat - v_row.burst * v_row.emission;
        END IF;
    END LOOP;
    IF held_by IS NOT NULL THEN
        held_for := held_until - v_now;
        RETURN NEXT;
        RETURN;
    END IF;
    RETURN QUERY SELECT c.*, NULL::text, NULL::timestamptz, NULL::interval, NULL::numeric, NULL::numeric
    FROM {{schema}}.claim(p_lanes, p_agent, p_owner, p_instance, p_lease, least(p_n, coalesce(v_units, p_n))::int,
                          p_token) c;
    GET DIAGNOSTICS v_got = ROW_COUNT;
    IF v_got > 0 THEN
        UPDATE {{schema}}.limits l SET tat = greatest(l.tat, v_now) + v_got * l.emission
        WHERE l.name = ANY (p_limits);
    END IF;
END $$;
