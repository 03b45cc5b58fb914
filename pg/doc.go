// Package pg is the PostgreSQL implementation of lease.Provider, qd's
// production queue.
//
// Everything lives in one schema (qd unless the URL says ?schema=NAME):
// tables lanes, tasks, runs, periodic, daemons, events, notifications,
// task_deps, limits, budgets and budget_usage, whose names and columns are
// a public contract for psql users, the row type settlement, and the
// functions claim (with claim_named, claim_any, claim_head and claim_from,
// see "The claim"; claim_limited for a claim through rate limits or a
// budget, see "Limits and budgets"), heartbeat, settle_runs, settle (see
// "Settlements"), defer_runs, enqueue, abandon_owner, reap_lane,
// finish_tasks, backoff, lane_key, limit_units, budget_period,
// budget_spent and record_usage, and those of chains (enqueue_after,
// chain_wake, chain_release, chain_revive, chain_retry, chain_cancel; see
// "Chains"). Migrate creates and upgrades the
// schema; Open never does, and every method fails with ErrNotMigrated
// until it has run.
//
// # Migrations and functions
//
// The SQL lives in two places, each fact once:
//
//   - migrations/NNN_name.sql: the DDL of schema version NNN (tables,
//     indexes, columns, row types, and the drop of a function whose
//     signature or result changed). A migration never creates a function.
//     Versions 2 and 3 changed only functions, so they now hold no DDL.
//   - functions/NAME.sql: the current definition of the function NAME, one
//     CREATE OR REPLACE FUNCTION with its SET options inline.
//
// Migrate runs in one READ COMMITTED transaction under
// pg_advisory_xact_lock(MigrateLockSpace, LaneKey(schema)), so concurrent
// qd migrate runs queue and each migration is applied once. It applies the
// migrations the schema lacks in version order and, when it applied any,
// creates or replaces every function; an up-to-date schema is left
// untouched. So a schema upgraded from an older version, which still has
// the functions an older qd installed, ends with exactly the functions of a
// fresh one. For that to hold, a change to a function comes with a new migration
// (which may hold no DDL), so that the version says which functions a
// schema has; TestFunctions_ChangeNeedsMigration fails otherwise. CREATE OR
// REPLACE cannot change a function's result type, OUT parameters or
// parameter names, so the migration that changes one of those drops the
// old function first, as 004 drops abandon_owner(text, text, text).
// TestProvider_MigrateUpgrade upgrades schemas made by the migrations of
// versions 1 to 4 as they were shipped (testdata/migrations-v4) and
// compares them with a fresh one.
//
// # Versions side by side
//
// Each migration may declare, on a line of its own, "-- floor: N": a qd
// built for schema version N or later may still run on a schema at the
// migration's version (its changes are additions the older build does
// not see). Without the line the floor is the migration's own version.
// Migrate records the floor in schema_migrations.floor (from version 17,
// which added the column). A build refuses, with ErrSchemaNewer naming
// both versions, a schema whose versions past its own have a floor above
// it: at open, at Migrate, and, for a provider already at work, at the
// first statement that fails because a function, table or column it names
// is missing (recheck), so that a daemon left running on a schema a newer
// qd replaced says why instead of "function does not exist".
//
// The functions that touch runs and tasks run with enable_seqscan off. A
// plpgsql statement keeps the generic plan it first settles on for the
// life of the session, and a plan made while runs held a few rows (a fresh
// queue, or statistics taken just after a TRUNCATE) scans runs
// sequentially, and every claim, abandon_owner and enqueue with a dedupe
// key then reads the whole table (docs/performance.md, "Inside the
// database functions"). Every statement in them has an index that serves
// it, so forbidding the scan costs nothing when the statistics are right.
//
// settle_runs and finish_tasks, which take arrays, also run with
// plan_cache_mode = force_generic_plan, and find their rows by id = ANY
// rather than by a join with the arrays. Left to the plan cache, their
// statements were planned again at every call (a generic plan counts on
// arrays of ten, and a call usually holds fewer), which cost more than
// running them; and a join's generic plan, made on statistics taken while
// few tasks ran, read every running task through tasks_state_id_idx to
// settle one (docs/performance.md has the figures). The state test there
// is written (state = 'running') IS TRUE, which no index serves, so that
// the primary key is the only index the planner can use.
//
// A few facts are written both in Go and in SQL, and a test compares the
// two over a table of inputs: the lane lock key (LaneKey, lane_key;
// TestLaneKey), the lane name pattern (lease.LanePattern, the CHECK on
// lanes.name; TestLaneName), the retry delay (lease.Backoff, backoff;
// TestBackoff) and the summary of an expired run (lease.SilenceSummary,
// reap_lane; TestSilenceSummary).
//
// # The claim
//
// One call of the claim function, in one round trip:
//
//	BEGIN ISOLATION LEVEL READ COMMITTED; SELECT * FROM qd.claim(...); COMMIT
//
// claim is a dispatcher, each of its steps a function of its own, in a
// file of its own under functions/:
//
//   - the lanes to try, best task first: the one lane named, as it is;
//     several named lanes, claim_named (through the lanes key); any lane,
//     claim_any (the lanes of the head of the queue, which claim_head
//     reads through the index of the agent's queued tasks or of all of
//     them, and of expired runs; every unpaused lane, through claim_named,
//     when that head falls short). Each case has a function of its own so
//     that each statement keeps one generic plan that searches an index: a
//     statement serving several cases with "p_lanes IS NULL OR ..." would
//     be planned again at every call or scan every lane.
//   - the take, claim_from: for each lane it takes
//     pg_advisory_xact_lock(LaneLockSpace, lane_key(lane)), reaps the
//     lane's expired leases through the index of live runs by lane, counts
//     the lane's live runs in a statement that starts after the lock is
//     held (so it sees every claim it waited for), and allots the lane
//     what its limit allows; then one statement takes every allotted
//     lane's best queued tasks FOR UPDATE SKIP LOCKED, up to its share,
//     with the lanes' locks still held, and the lanes after them make up
//     a share left short.
//
// The explicit READ COMMITTED matters: under REPEATABLE READ the count
// would use a snapshot older than the lock and the lane bound would break.
// claim_from and claim_head are only called by claim and claim_any, and
// their plans are made under the caller's settings; a SET clause of their
// own would cost every call the saving and restoring of the setting
// (3-6% of a claim of one lane). What the split into functions cost
// against the single function of schema version 18 is measured in
// docs/performance.md, "Inside the database functions".
//
// Every claim carries a token (lease.ClaimParams.Token, random unless the
// caller names one), recorded in runs.claim_token. The function first takes
// pg_advisory_xact_lock(ClaimTokenLockSpace, hashtext(token)) and returns
// the live runs of the token, claiming nothing, if it already made any.
// When a claim's outcome is unknown (the connection failed after the
// statement was sent), claim.go asks again with the token on a fresh
// connection until the lease's local deadline; past it, giveback.go gives
// the token's runs back, abandoned and refunded, once the database answers.
//
// # Limits and budgets
//
// A claim that names rate limits or a budget calls claim_limited instead
// of claim (a claim without them pays nothing for the feature). It locks
// the limits' rows in name order, checks the budget's period total
// (budget_spent over budget_usage, budget_period in the budget's zone),
// counts each limit's units (limit_units, GCRA; lease.LimitUnits is the
// same in Go), calls claim for at most as many tasks as the scarcest limit
// has units, and moves each limit's theoretical arrival time on by one
// emission per run made, all in the claim's transaction (docs/limits.md).
// A held claim returns one row naming the limit or budget and when to ask
// again. Spend and record_usage write after the fact; record_usage records
// a budget's exhaustion in events once per period under the budget's row
// lock. A settlement that defers its task (lease.Settlement.Deferred)
// goes through defer_runs first, which counts the deferral on the task or,
// past the cap, turns it into the run's failure, inside the statement
// that calls settle_runs.
//
// # Settlements
//
// settle_runs takes a call's settlements as one array of the row type
// settlement (declared in migrations/019_settlement.sql), one row per
// settlement, and writes each run's outcome, log_error included, in one
// statement; the events of the settlements that name one in one more.
// Settle sends the rows as a JSON array, read into settlement rows by
// jsonb_populate_record in the statement that calls settle_runs:
//
//	SELECT run_id, status FROM qd.settle_runs(ARRAY(
//	    SELECT jsonb_populate_record(NULL::qd.settlement, e.value)
//	    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY e ORDER BY e.ordinality))
//
// rather than as the composite itself, which pgx encodes only once the
// type's oid is registered on each connection: LoadTypes after connect
// costs a round trip per connection, a connection opened before Migrate
// made the type never learns it (tried: every Settle on the connections
// opened before the tests migrated failed to encode), nor one that outlives
// the type being made again under another oid. JSON needs nothing of the
// connection, so it passes a pooler and every query exec mode unchanged,
// and costs no more than the composite (docs/performance.md, "Inside the
// database functions").
//
// settle, with eleven parallel arrays, is the call of the qd builds for
// schema versions 16 to 18, which write log_error and events in statements
// of their own: it hands its rows to settle_runs, and goes with the
// migration that raises the floor past 18.
//
// # Chains
//
// A task enqueued with after (enqueue_after) is 'waiting', which no claim
// function reads, so the claim is unchanged. enqueue_after holds the
// tasks it names FOR SHARE until it commits and reads their states under
// that lock: a parent finishing meanwhile waits for it, and then sees the
// new row of task_deps. finish_tasks, the one place a run's end moves its
// task, wakes what waits for the tasks that reached a final state
// (chain_release, then chain_wake) in a statement of its own, so in the
// same transaction; so does a cancel, and a late completion of a reaped
// run brings back what its task's failure cancelled (chain_revive).
// chain_wake locks
// the waiting tasks in id order before it reads their parents, in a new
// statement: two parents finishing at once are seen one after the other.
// task_deps' CHECK (parent_id < task_id) keeps chains acyclic.
//
// # Two pools
//
// A Provider holds two connection pools. The lease path (claim,
// heartbeat, settle, the cancel poll, give-backs, the daemon's name) has
// the first to itself. Everything else, the listings, lanes for a status
// or a scrape, the dashboard's reads and writes (Dashboard, as ui.Store)
// and the notifier's, goes through the second, of at most ReadConns
// connections with a statement timeout of ReadStatementTimeout: a flood
// of pages waits for those, and never for a connection a heartbeat needs.
//
// # Heartbeats
//
// Heartbeats rewrite only unindexed columns of runs (lease_expires_at,
// last_heartbeat_at, pid, last_output_at), in a table with fillfactor 70,
// so they are HOT updates and never touch tasks. Only the database clock,
// clock_timestamp(), decides leases.
//
// # Notifications
//
// events is an outbox: finish_tasks, the one place a task becomes failed,
// inserts the run's 'failed' event in the statement that fails it, so a
// settlement, a claim's reap and abandon_owner all record it in their
// transaction; settle_runs inserts a settlement's Event (a timeout, a
// stall) in its own; RecordEvent what only a daemon saw. TakeEvents, in one
// statement, locks untaken events of the routed agents FOR UPDATE SKIP
// LOCKED, marks them taken and inserts a pending notification per target
// (ON CONFLICT on run, event and target: told once). ClaimNotifications,
// in one statement, fails for good the pending rows of its targets past
// the give-up age, then claims the due ones (pending whose due_at passed,
// or sending whose claim ran out), FOR UPDATE SKIP LOCKED, setting due_at
// to the end of the claim; FinishNotification writes a try's result only
// while that try (tries) still holds the row. None of this is on the lease
// path: settle_runs only inserts, and only for the runs that have an event.
package pg
