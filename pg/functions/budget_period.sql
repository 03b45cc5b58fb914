-- budget_period is the calendar period of p_at in time zone p_tz: its
-- start and the next one's, as lease.BudgetPeriod computes them in Go (a
-- week starts on Monday).
CREATE OR REPLACE FUNCTION {{schema}}.budget_period(p_period text, p_tz text, p_at timestamptz)
RETURNS TABLE (start timestamptz, next timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT x.local AT TIME ZONE p_tz, (x.local + x.step) AT TIME ZONE p_tz
    FROM (SELECT date_trunc(u.unit, p_at AT TIME ZONE p_tz) AS local, u.step
          FROM (SELECT CASE p_period WHEN '1h' THEN 'hour' WHEN '1w' THEN 'week' WHEN '1mo' THEN 'month' ELSE 'day' END AS unit,
                       CASE p_period WHEN '1h' THEN interval '1 hour' WHEN '1w' THEN interval '1 week'
                                     WHEN '1mo' THEN interval '1 month' ELSE interval '1 day' END AS step) u) x
$$;
