// Package lease defines qd's queue: its domain types, the Provider interface
// every backend implements, the errors callers branch on, and Redact, which
// hides the password of a database URL. It imports the standard library
// only, and no backend: package backend picks one by the URL's scheme.
//
// # Model
//
// A lane is a named stream of work with a limit (max_running, default 1) that
// may be paused. A task is one work item in a lane, for one agent, with a JSON
// payload, a priority (lower runs first), a run_after time, an attempt counter
// and a state: queued, running, done, failed or cancelled. A run is one
// attempt at a task, held by an owner under a lease: it is live while its
// state is running and its lease has not expired. A heartbeat extends the
// lease. Settling a run ends it as completed, failed, abandoned or cancelled.
//
// Only the provider's clock decides leases (for package pg, the database's
// clock_timestamp()); no host clock is ever compared with a lease. A lease
// that has expired is lost even before anyone reaps it.
//
// # Invariants
//
// Every provider keeps these seven, each checked by a subtest of
// leasetest.Run:
//
//  1. Atomic claim: a claim commits all its effects (task running, attempt
//     counted, run inserted) or none. Checked by Claim/Atomic.
//  2. Exclusive lease: a task has at most one live run at any instant.
//     Checked by Claim/ExclusiveUnderRace.
//  3. Lane bound: live runs in a lane never exceed its limit, under any
//     number of concurrent claimers. Checked by Claim/LaneBoundUnderRace.
//  4. Empty is not an error: no eligible task gives ErrNoWork and changes no
//     task. Checked by Claim/EmptyIsNotAnError.
//  5. Expiry is reaped: once a lease has expired, the next claim that covers
//     its lane abandons that run, writes its silence into the summary, and
//     makes the task claimable again (or failed when out of attempts).
//     Checked by Reap/ExpiredLease.
//  6. Fencing: heartbeat, complete, fail or abandon from a run that is no
//     longer live is refused with ErrLeaseLost and changes nothing.
//     Checked by Fencing/StaleRun.
//  7. Order: among eligible tasks a claim takes the lowest priority number,
//     then the oldest run_after, then the lowest id; tasks whose run_after
//     is in the future are not eligible. Checked by Claim/Order.
//
// # Failure handling
//
// A failed attempt with attempts left goes back to queued after Backoff; with
// none left the task is failed. An abandoned run (signal, timeout, lost
// lease, shutdown, reap) makes its task claimable at once, or failed when out
// of attempts, unless the settlement refunds the attempt. Settling a run
// again with the outcome it already has succeeds, so a client that lost the
// reply to its commit can retry. A cancelled running task is marked; its
// holder learns it from the next heartbeat and settles the run as cancelled,
// and a reaped run of a cancelled task leaves the task cancelled.
//
// A claim is idempotent by its token (ClaimParams.Token, random for each
// call unless the caller names one): the runs a claim makes record it, and
// a claim whose token already made runs returns those still live instead
// of claiming again. A client that lost the reply to a claim's commit (the
// connection died after the statement was sent) asks again with the same
// token on a fresh connection, and is given the runs it made, their
// attempts counted once. If it cannot reach the provider before the lease's
// local deadline, it gives the token's runs back, abandoned with the attempt
// refunded, as soon as it can, and never starts them. Checked by
// Claim/Token.
//
// # Chains
//
// A task may wait for others (EnqueueParams.After; see Chains): it is
// TaskWaiting, which no claim takes, until the tasks it names are done,
// and becomes queued in the transaction that finishes the last of them;
// one of them failing or cancelled cancels it, and what waits for it, in
// that transaction too. An enqueue and a finish that race cannot leave a
// task waiting for a parent that ended. A completion's Settlement.Result
// is the run's, and the task's. Checked by Chain/WaitingNeverClaimed,
// Chain/EnqueueRacesFinish, Chain/Results, Chain/FailureCancels,
// Chain/Enqueue, Chain/Cancel and Chain/LateCompletion.
//
// # Notifications
//
// What is worth telling is recorded where it happens, as an event in an
// outbox: a task that fails for good records EventFailed in the same
// transaction that fails it, whoever fails it (a settlement, a claim's
// reap, AbandonOwner, a `qd claim` script's `qd fail`), so a crash can
// lose none; a settlement records its Event (a timeout, a stall) in its
// own transaction; RecordEvent records what only a daemon saw (a lease
// lost). An event is recorded once per run. Daemons take events
// (TakeEvents) into notifications, one per target, each once per run,
// event and target however many daemons take them, and send them from
// there: ClaimNotifications gives each due notification to one caller at
// a time, for a sending lease; FinishNotification, fenced on the try,
// records it sent, failed for good, or pending again after a delay. A
// sender that dies mid-try leaves its claim to expire, and the next claim
// tries it again. Checked by Notify/FailedByReap, Notify/FailedByAbandon,
// Notify/SettleEvent, Notify/Once, Notify/ClaimOnce, Notify/Retry and
// Notify/GiveUp.
//
// # Limits and budgets
//
// A claim that names rate limits (ClaimParams.Limits) takes one unit of
// each for each run it makes, in its own transaction, by GCRA (Limit); a
// claim that names a budget (ClaimParams.Budget) makes no run while the
// budget's period has spent its max. Neither is a share per claimer: the
// limit and the budget are the provider's, so whatever the number of
// claimers, no half-open window of a limit's period holds more than rate
// + burst claimed runs (a closed one at most one more), and a claim held
// back returns a *HeldError saying when to ask again, having claimed and
// taken nothing. Checked by Limit/RateUnderRace, Limit/HoldAndSpend and
// Budget/StopsClaims. A settlement that defers its task
// (Settlement.Deferred) refunds the attempt up to MaxDeferrals times, then
// fails the run; checked by Settle/Deferral.
package lease
