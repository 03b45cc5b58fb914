-- budget_spent is what budget p_name's runs reported in [p_start, p_next).
CREATE OR REPLACE FUNCTION {{schema}}.budget_spent(p_name text, p_start timestamptz, p_next timestamptz)
RETURNS numeric
LANGUAGE sql STABLE AS $$
    SELECT coalesce(sum(u.amount), 0) FROM {{schema}}.budget_usage u
    WHERE u.budget = p_name AND u.at >= p_start AND u.at < p_next
$$;
