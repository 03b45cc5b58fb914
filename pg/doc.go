// Package pg is the PostgreSQL implementation of lease.Provider, qd's
// production queue.
//
// Everything lives in one schema (qd unless the URL says ?schema=NAME):
// tables lanes, tasks, runs and periodic, whose names and columns are a
// public contract for psql users, and the functions claim, heartbeat,
// settle, enqueue, abandon_owner, reap_lane, finish_task, backoff and
// lane_key. Migrate creates and upgrades the schema; Open never does, and
// every method fails with ErrNotMigrated until it has run.
//
// # The claim
//
// One call of the claim function, in one round trip:
//
//	BEGIN ISOLATION LEVEL READ COMMITTED; SELECT * FROM qd.claim(...); COMMIT
//
// For each lane it covers it takes pg_advisory_xact_lock(LaneLockSpace,
// lane_key(lane)), reaps the lane's expired leases through the index of
// live runs by lane, counts the lane's live runs in a statement that starts
// after the lock is held (so it sees every claim it waited for), and takes
// the best queued tasks FOR UPDATE SKIP LOCKED up to the lane's limit. The
// explicit READ COMMITTED matters: under REPEATABLE READ the count would
// use a snapshot older than the lock and the lane bound would break.
//
// # Heartbeats
//
// Heartbeats rewrite only unindexed columns of runs (lease_expires_at,
// last_heartbeat_at, pid, last_output_at), in a table with fillfactor 70,
// so they are HOT updates and never touch tasks. Only the database clock,
// clock_timestamp(), decides leases.
package pg
