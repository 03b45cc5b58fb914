-- qd queue schema, version 21: an agent may be paused (qd agent pause).
-- claim takes nothing of a paused agent, for a daemon and a `qd claim`
-- alike, until it is resumed; runs already live go on. finish_tasks no
-- longer moves the run_after of a task that ends for good, so a failed
-- task does not say it runs after its end. settle_runs takes a late
-- completion only of a run abandoned after its lease ran out (reaped),
-- never of one its owner gave up while it held the lease. All are
-- additions an older qd does not see: it claims through the same claim
-- and gets the same answers, so the floor stays 16.
-- floor: 16
CREATE TABLE {{schema}}.agent_pauses (
    agent     text PRIMARY KEY CHECK (agent ~ '^[a-z0-9][a-z0-9._-]{0,62}$'),
    paused_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    set_by    text
);
