-- qd queue schema, version 19: the claim and the settlement are readable.
--
-- claim is a dispatcher: each lane strategy is a function of its own
-- (claim_named for several named lanes, claim_any for any lane, with
-- claim_head reading the head of the queue), and claim_from takes from the
-- lanes a strategy chose. claim keeps its signature and result.
--
-- settle_runs takes a call's settlements as one array of the row type
-- settlement, declared here, and writes a run's log_error with its outcome
-- and its event (a timeout, a stall) itself, where the daemon wrote both
-- in statements of its own beside settle.
--
-- A qd built for version 16, 17 or 18 runs on this schema unchanged, so
-- the floor stays 16: it calls claim, heartbeat, enqueue and abandon_owner,
-- whose signatures and results stay, and settle with eleven arrays, which
-- stays, now handing its rows to settle_runs; it writes log_error and
-- events itself, as before. No function is dropped.
-- floor: 16
CREATE TYPE {{schema}}.settlement AS (
    run_id      bigint,
    claim_token text,
    outcome     text,
    summary     text,
    exit_code   int,
    signal      text,
    output_tail text,
    retry_in    interval,
    refund      boolean,
    cpu_usec    bigint,
    memory_peak bigint,
    log_error   text,
    event       text
);
