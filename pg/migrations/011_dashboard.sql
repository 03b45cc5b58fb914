-- qd queue schema, version 11: indexes for the dashboard (qd ui), so that
-- its pages stay cheap on a long history. None covers a column a heartbeat
-- writes, so heartbeats stay HOT updates.

-- The task listing pages newest first by id within a lane, an agent or a
-- state, and bounds a time range through created_at.
CREATE INDEX tasks_lane_id_idx ON {{schema}}.tasks (lane, id);
CREATE INDEX tasks_agent_id_idx ON {{schema}}.tasks (agent, id);
CREATE INDEX tasks_state_id_idx ON {{schema}}.tasks (state, id);
CREATE INDEX tasks_created_at_idx ON {{schema}}.tasks (created_at);

-- The timeline and the throughput charts read runs by when they started
-- and finished; the overview reads each agent's last run.
CREATE INDEX runs_started_at_idx ON {{schema}}.runs (started_at);
CREATE INDEX runs_finished_at_idx ON {{schema}}.runs (finished_at)
    WHERE finished_at IS NOT NULL;
CREATE INDEX runs_agent_id_idx ON {{schema}}.runs (agent, id);
