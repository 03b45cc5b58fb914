// Package notify tells people that something failed. For each event (a
// task failed for good, a run timed out, stalled or lost its lease) it runs
// the configured command with the facts as JSON on stdin and in QD_*
// variables, and posts the same JSON to the configured webhook.
//
// It sends from the queue, never from memory. Events are recorded in the
// queue where they happen (lease.Provider's outbox: the transaction that
// fails a task records its failure, whoever fails it); a Sender polls it,
// takes the events of the agents its Plan routes into one notification per
// target (lease.Provider.TakeEvents: once per run, event and target
// however many daemons share the queue), claims the due ones for a sending
// lease (ClaimNotifications: one sender at a time) and records how each
// try went (FinishNotification). So a burst, a restart or a crash loses
// none: what was not sent is still in the table, and a claim whose sender
// died runs out and is taken again.
//
// Each target is tried on its own: PerTarget tries at once, each from a
// goroutine of its own and bounded by its timeout (CommandTimeout,
// WebhookTimeout, or the Plan's), so a hanging webhook holds up neither a
// command nor another webhook. A failed try is retried after the Plan's
// backoff, doubled at each try up to MaxBackoff, until the notification is
// sent or GiveUp has passed since it was recorded; then it is failed for
// good. A target whose last try failed is down: it gets one try at a time,
// after the same backoff, until one succeeds, and Counts reports it.
//
// A command runs in a process group of its own, killed if the daemon dies;
// its exit status decides, and what it leaves running in its group when it
// exits is killed and noted in the record. A webhook is recorded, logged
// and shown redacted (lease.RedactWebhook): the full URL is only in the
// config and the request.
//
// Nothing here is on the lease path: the daemon's OnEnd only kicks the
// sender, and Record only appends to a list.
//
// Files: notify.go (events, targets, the plan), sender.go (the poll),
// send.go (one try and its record, the webhook), command.go and spawn_*.go
// (the command).
//
// It imports lease alone of qd's packages.
package notify
