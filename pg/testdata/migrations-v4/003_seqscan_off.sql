-- qd queue schema, version 3: abandon_owner, enqueue and finish_task run
-- with enable_seqscan off too, for the reason given in version 2. A session
-- that first planned them while tasks and runs were nearly empty otherwise
-- kept scanning both tables sequentially once they had grown (measured:
-- 7 ms for abandon_owner over 100k runs; every enqueue with a dedupe key
-- read all of tasks). Each of their statements has an index that serves it.
ALTER FUNCTION {{schema}}.abandon_owner(text, text, text)
    SET enable_seqscan = off;
ALTER FUNCTION {{schema}}.enqueue(text, text, text, int, timestamptz, interval, int, text)
    SET enable_seqscan = off;
ALTER FUNCTION {{schema}}.finish_task(bigint, text, interval, boolean)
    SET enable_seqscan = off;
