// Package notify tells people that something failed. For each event (a
// task failed for good, a run timed out, stalled or lost its lease) it runs
// the configured command with the facts as JSON on stdin and in QD_*
// variables, and posts the same JSON to the configured webhook.
//
// Nothing it does can hold up the daemon: Notify only queues (a bounded
// queue; when it is full the notification is dropped and counted), one
// goroutine sends, each command has 30 s and each webhook 10 s, and a
// failure is logged, counted and recorded, never retried. Before sending,
// each notification is claimed in the queue's database
// (lease.Provider.ClaimNotification), so that an event is told once however
// many daemons share the queue, and its outcome is recorded where
// `qd show` displays it.
//
// It imports lease alone of qd's packages.
package notify
