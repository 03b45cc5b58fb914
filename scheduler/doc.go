// Package scheduler wakes the daemon on each agent's schedule and claims
// work for it, and enqueues the tasks of periodic schedules.
//
// On each tick of an agent's schedule the scheduler claims, in one call, as
// many tasks of that agent (within its lanes) as it has free slots. A tick
// that comes while the agent is full, or while its previous claim is still in
// flight, does nothing. When a claim filled every free slot there is likely
// more work waiting, so the agent stays "hot": each run that ends kicks
// another claim until a claim comes back short. Idle agents cost one claim
// per tick and nothing in between.
//
// Periodic schedules enqueue one task per tick. The tick is recorded in the
// database together with the enqueue, so with several daemons sharing one
// database each tick enqueues exactly once, and a restart loses nothing.
// Ticks missed while no daemon ran are skipped and logged, or, with catch-up,
// the latest of them is enqueued once at start-up.
//
// Schedules are parsed with robfig/cron; this package only computes next
// ticks, so that @every intervals can be aligned across daemons.
package scheduler
