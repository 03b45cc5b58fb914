-- backoff is the delay before the next attempt after attempt failed:
-- base doubled per attempt, capped at an hour, with ±20% jitter, as
-- lease.Backoff computes it in Go. finish_tasks uses it when a failed run
-- names no retry delay. The exponent stops at 30 so that the product
-- cannot overflow an interval.
CREATE OR REPLACE FUNCTION {{schema}}.backoff(attempt int, base interval) RETURNS interval
LANGUAGE sql VOLATILE
AS $$ SELECT d * (0.8 + 0.4 * random())
      FROM (SELECT least(base * power(2, least(greatest(attempt, 1) - 1, 30)), interval '1 hour') AS d) s $$;
