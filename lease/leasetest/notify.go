package leasetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

const (
	cmdTarget  = "/usr/bin/notify"
	hookTarget = "https://hooks.example/… [0123abcd]"
)

// routes tells agent's events to each target.
func routes(agent string, targets ...string) []lease.NotifyRoute {
	var out []lease.NotifyRoute
	for _, e := range lease.Events {
		for _, t := range targets {
			out = append(out, lease.NotifyRoute{Agent: agent, Event: e, Target: t})
		}
	}
	return out
}

func mustTake(tb testing.TB, p lease.Provider, by string, rs []lease.NotifyRoute) int {
	tb.Helper()
	n, err := p.TakeEvents(context.Background(), by, rs, 1000)
	if err != nil {
		tb.Fatalf("take events: %v", err)
	}
	return n
}

func mustNotifications(tb testing.TB, p lease.Provider, taskID int64) []lease.Notification {
	tb.Helper()
	ns, err := p.Notifications(context.Background(), taskID)
	if err != nil {
		tb.Fatalf("notifications of task %d: %v", taskID, err)
	}
	return ns
}

// wantNotified checks that task taskID has exactly one notification of
// event about run runID for each target, pending.
func wantNotified(tb testing.TB, p lease.Provider, taskID, runID int64, event string, targets ...string) {
	tb.Helper()
	ns := mustNotifications(tb, p, taskID)
	if len(ns) != len(targets) {
		tb.Fatalf("task %d has %d notifications, want %d (one per target): %+v", taskID, len(ns), len(targets), ns)
	}
	for i, n := range ns {
		if n.RunID != runID || n.Event != event || n.Target != targets[i] || n.Status != lease.NotificationPending || n.Tries != 0 {
			tb.Errorf("notification %d of task %d: %+v; want run %d, %s to %s, pending", i, taskID, n, runID, event, targets[i])
		}
	}
}

func claimTargets(by string, hold time.Duration, n int, targets ...string) lease.NotifyClaim {
	c := lease.NotifyClaim{By: by, Lease: hold}
	for _, t := range targets {
		c.Targets = append(c.Targets, lease.NotifyTargetClaim{Target: t, N: n})
	}
	return c
}

func mustClaimNotes(tb testing.TB, p lease.Provider, c lease.NotifyClaim) []lease.NotificationJob {
	tb.Helper()
	got, _, err := p.ClaimNotifications(context.Background(), c)
	if err != nil {
		tb.Fatalf("claim notifications: %v", err)
	}
	return got
}

// Ensure a task whose last attempt is reaped (its lease expired) records
// one failed event however many claims race to reap it, that taking
// events makes one notification per target, and that taking again (as a
// second daemon would) makes none; an event that no route names is left
// for a taker that has one.
func testNotifyFailedByReap(t *testing.T, p lease.Provider) {
	ep := task("nreap", "a")
	ep.MaxAttempts = 1
	id := mustEnqueue(t, p, ep)
	run := MustClaim(t, p, claimShort("nreap"))
	time.Sleep(pastShort)
	race(6, func(int) { _, _ = p.Claim(context.Background(), claimIn("nreap")) })
	wantState(t, p, id, lease.TaskFailed)
	if n := mustTake(t, p, "d0", routes("other", cmdTarget)); n != 0 {
		t.Errorf("taking events for another agent made %d notifications, want 0", n)
	}
	var made sync.Map
	race(4, func(g int) {
		n, err := p.TakeEvents(context.Background(), fmt.Sprint("d", g), routes("a", cmdTarget, hookTarget), 1000)
		if err != nil {
			t.Errorf("take events: %v", err)
		}
		made.Store(g, n)
	})
	total := 0
	made.Range(func(_, v any) bool { total += v.(int); return true })
	if total != 2 {
		t.Errorf("racing takers made %d notifications, want 2 (one per target)", total)
	}
	wantNotified(t, p, id, run.RunID, lease.EventFailed, cmdTarget, hookTarget)
	if n := mustTake(t, p, "d9", routes("a", cmdTarget, hookTarget)); n != 0 {
		t.Errorf("taking again made %d notifications, want 0", n)
	}
}

// Ensure a task failed for good by AbandonOwner (its daemon died on the
// last attempt) or by a failed settlement records one failed event, and
// that one with attempts left records none.
func testNotifyFailedByAbandon(t *testing.T, p lease.Provider) {
	ep := task("nabandon", "a")
	ep.MaxAttempts = 1
	last := mustEnqueue(t, p, ep)
	ep.MaxAttempts = 3
	more := mustEnqueue(t, p, ep)
	mustSetLane(t, p, "nabandon", 2)
	cp := claimIn("nabandon")
	cp.Owner, cp.Instance = "dead", "old"
	l1, l2 := MustClaim(t, p, cp), MustClaim(t, p, cp)
	if _, err := p.AbandonOwner(context.Background(), "dead", []string{"old"}, "daemon died"); err != nil {
		t.Fatal(err)
	}
	lastRun := l1.RunID
	if l1.TaskID != last {
		lastRun = l2.RunID
	}
	wantState(t, p, last, lease.TaskFailed)
	wantState(t, p, more, lease.TaskQueued)
	sp := task("nabandon-fail2", "a")
	sp.MaxAttempts = 1
	failing := mustEnqueue(t, p, sp)
	l3 := MustClaim(t, p, claimIn("nabandon-fail2"))
	mustSettle(t, p, lease.Settlement{RunID: l3.RunID, Outcome: lease.RunFailed, Summary: "exited 1"})
	if n := mustTake(t, p, "d1", routes("a", cmdTarget)); n != 2 {
		t.Errorf("took %d notifications, want 2 (the abandoned and the failed task)", n)
	}
	wantNotified(t, p, last, lastRun, lease.EventFailed, cmdTarget)
	wantNotified(t, p, failing, l3.RunID, lease.EventFailed, cmdTarget)
	if ns := mustNotifications(t, p, more); len(ns) != 0 {
		t.Errorf("a task with attempts left was notified: %+v", ns)
	}
}

// Ensure a settlement's event is recorded with it, once even when the
// settlement is retried, that RecordEvent records once and refuses an
// unknown run or event, and that a route picks events by name.
func testNotifySettleEvent(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	id := mustEnqueue(t, p, task("nevent", "a"))
	l := MustClaim(t, p, claimIn("nevent"))
	st := lease.Settlement{RunID: l.RunID, Outcome: lease.RunAbandoned, Summary: "timed out", RetryIn: time.Hour, Event: lease.EventTimeout}
	mustSettle(t, p, st)
	mustSettle(t, p, st)
	for range 2 {
		if err := p.RecordEvent(ctx, l.RunID, lease.EventLeaseLost); err != nil {
			t.Fatalf("record event: %v", err)
		}
	}
	if err := p.RecordEvent(ctx, l.RunID+1000, lease.EventLeaseLost); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("record event of an unknown run: %v, want ErrNotFound", err)
	}
	if err := p.RecordEvent(ctx, l.RunID, "exploded"); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("record an unknown event: %v, want ErrInvalid", err)
	}
	bad := st
	bad.Event = "exploded"
	if errs, err := p.Settle(ctx, bad); err != nil || !errors.Is(errs[0], lease.ErrInvalid) {
		t.Errorf("settle with an unknown event: %v %v, want ErrInvalid", errs, err)
	}
	only := []lease.NotifyRoute{{Agent: "a", Event: lease.EventTimeout, Target: cmdTarget}}
	if n := mustTake(t, p, "d1", only); n != 1 {
		t.Errorf("took %d timeout notifications, want 1", n)
	}
	wantNotified(t, p, id, l.RunID, lease.EventTimeout, cmdTarget)
	lost := []lease.NotifyRoute{{Agent: "a", Event: lease.EventLeaseLost, Target: cmdTarget}}
	if n := mustTake(t, p, "d1", lost); n != 1 {
		t.Errorf("took %d lease_lost notifications, want 1", n)
	}
}

// Ensure two takers that name the same targets make one notification per
// run, event and target, and that a taker naming another target of an
// event already taken makes none (the first taker decided whom to tell).
func testNotifyOnce(t *testing.T, p lease.Provider) {
	ep := task("nonce", "a")
	ep.MaxAttempts = 1
	var ids []int64
	for range 5 {
		id := mustEnqueue(t, p, ep)
		l := MustClaim(t, p, claimIn("nonce"))
		mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed})
		ids = append(ids, id)
	}
	var mu sync.Mutex
	total := 0
	race(4, func(g int) {
		n, err := p.TakeEvents(context.Background(), fmt.Sprint("d", g), routes("a", cmdTarget), 2)
		for err == nil && n > 0 {
			mu.Lock()
			total += n
			mu.Unlock()
			n, err = p.TakeEvents(context.Background(), fmt.Sprint("d", g), routes("a", cmdTarget), 2)
		}
		if err != nil {
			t.Errorf("take events: %v", err)
		}
	})
	if total != len(ids) {
		t.Errorf("racing takers made %d notifications, want %d", total, len(ids))
	}
	if n := mustTake(t, p, "late", routes("a", hookTarget)); n != 0 {
		t.Errorf("a later taker with another target made %d notifications, want 0", n)
	}
	for _, id := range ids {
		if ns := mustNotifications(t, p, id); len(ns) != 1 {
			t.Errorf("task %d: %d notifications, want 1", id, len(ns))
		}
	}
}

// failedTasks makes n tasks of agent a in lane that failed for good and
// takes their events into notifications to targets.
func failedTasks(t *testing.T, p lease.Provider, lane string, n int, targets ...string) []int64 {
	t.Helper()
	ep := task(lane, "a")
	ep.MaxAttempts = 1
	var ids []int64
	for range n {
		ids = append(ids, mustEnqueue(t, p, ep))
		l := MustClaim(t, p, claimIn(lane))
		mustSettle(t, p, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "exited 1: boom"})
	}
	if made := mustTake(t, p, "d", routes("a", targets...)); made != n*len(targets) {
		t.Fatalf("took %d notifications, want %d", made, n*len(targets))
	}
	return ids
}

// Ensure racing senders each claim a notification at most once between
// them (no notification goes to two callers), that every one is claimed,
// that a claim carries the facts of its run, and that a finish from a try
// that no longer holds the notification is refused.
func testNotifyClaimOnce(t *testing.T, p lease.Provider) {
	ids := failedTasks(t, p, "nclaim", 12, cmdTarget, hookTarget)
	var mu sync.Mutex
	seen := map[int64]string{}
	race(6, func(g int) {
		by := fmt.Sprint("s", g)
		for {
			got, _, err := p.ClaimNotifications(context.Background(), claimTargets(by, longLease, 3, cmdTarget, hookTarget))
			if err != nil {
				t.Errorf("claim notifications: %v", err)
				return
			}
			if len(got) == 0 {
				return
			}
			mu.Lock()
			for _, j := range got {
				if prev, ok := seen[j.ID]; ok {
					t.Errorf("notification %d claimed by %s and %s", j.ID, prev, by)
				}
				seen[j.ID] = by
				if j.Run.ID != j.RunID || j.Run.Agent != "a" || j.Run.Lane != "nclaim" || j.Run.Summary != "exited 1: boom" ||
					j.MaxAttempts != 1 || j.Run.Attempt != 1 || j.Tries != 1 || j.SentBy != by || j.Status != lease.NotificationSending {
					t.Errorf("claimed job %+v lacks its run's facts", j)
				}
			}
			mu.Unlock()
		}
	})
	if len(seen) != 2*len(ids) {
		t.Errorf("%d notifications claimed, want %d", len(seen), 2*len(ids))
	}
	ns := mustNotifications(t, p, ids[0])
	err := p.FinishNotification(context.Background(), ns[0].ID, 2, lease.NotifyResult{Status: lease.NotificationSent})
	if !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("finish with a try that does not hold it: %v, want ErrLeaseLost", err)
	}
	if err := p.FinishNotification(context.Background(), ns[0].ID, 1, lease.NotifyResult{Status: lease.NotificationSent, Detail: "exit 0"}); err != nil {
		t.Fatalf("finish: %v", err)
	}
	got := mustNotifications(t, p, ids[0])[0]
	if got.Status != lease.NotificationSent || got.Detail != "exit 0" || got.FinishedAt.IsZero() || !got.DueAt.IsZero() {
		t.Errorf("sent notification: %+v", got)
	}
}

// Ensure a failed try that is to be retried waits its delay and is then
// claimed again with its tries counted, and that a claim whose sender
// died (its lease ran out) is claimed again by another sender, the dead
// one's finish refused.
func testNotifyRetry(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	failedTasks(t, p, "nretry", 1, cmdTarget)
	first := mustClaimNotes(t, p, claimTargets("s1", longLease, 5, cmdTarget))
	if len(first) != 1 {
		t.Fatalf("claimed %d, want 1", len(first))
	}
	id := first[0].ID
	retry := lease.NotifyResult{Status: lease.NotificationPending, Detail: "exit 1", RetryIn: shortLease}
	if err := p.FinishNotification(ctx, id, 1, retry); err != nil {
		t.Fatal(err)
	}
	if got := mustClaimNotes(t, p, claimTargets("s1", longLease, 5, cmdTarget)); len(got) != 0 {
		t.Errorf("claimed %+v before its retry delay", got)
	}
	time.Sleep(pastShort)
	again := mustClaimNotes(t, p, claimTargets("s2", shortLease, 5, cmdTarget))
	if len(again) != 1 || again[0].ID != id || again[0].Tries != 2 || again[0].Detail != "exit 1" {
		t.Fatalf("claimed after the delay: %+v, want notification %d on its second try", again, id)
	}
	time.Sleep(pastShort) // s2 dies holding it
	third := mustClaimNotes(t, p, claimTargets("s3", longLease, 5, cmdTarget))
	if len(third) != 1 || third[0].ID != id || third[0].Tries != 3 || third[0].SentBy != "s3" {
		t.Fatalf("claimed after the sender's lease ran out: %+v, want notification %d on its third try", third, id)
	}
	if err := p.FinishNotification(ctx, id, 2, lease.NotifyResult{Status: lease.NotificationSent}); !errors.Is(err, lease.ErrLeaseLost) {
		t.Errorf("the dead sender's finish: %v, want ErrLeaseLost", err)
	}
	if err := p.FinishNotification(ctx, id, 3, lease.NotifyResult{Status: lease.NotificationFailed, Detail: "exit 1"}); err != nil {
		t.Fatal(err)
	}
	if got := mustClaimNotes(t, p, claimTargets("s4", longLease, 5, cmdTarget)); len(got) != 0 {
		t.Errorf("a notification failed for good was claimed again: %+v", got)
	}
}

// Ensure a pending notification older than the claim's give-up age is
// failed for good by the claim, with the detail lease.GiveUpDetail says,
// rather than claimed; one of another target is left alone.
func testNotifyGiveUp(t *testing.T, p lease.Provider) {
	ids := failedTasks(t, p, "ngiveup", 1, cmdTarget, hookTarget)
	c := claimTargets("s1", longLease, 5, hookTarget)
	got := mustClaimNotes(t, p, c)
	if len(got) != 1 {
		t.Fatalf("claimed %d, want 1", len(got))
	}
	retry := lease.NotifyResult{Status: lease.NotificationPending, Detail: "timed out", RetryIn: 0}
	if err := p.FinishNotification(context.Background(), got[0].ID, 1, retry); err != nil {
		t.Fatal(err)
	}
	time.Sleep(pastShort)
	c.GiveUp = shortLease
	claimed, gaveUp, err := p.ClaimNotifications(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := lease.GiveUpDetail(shortLease, 1, "timed out")
	if len(claimed) != 0 || len(gaveUp) != 1 || gaveUp[0].Status != lease.NotificationFailed || gaveUp[0].Detail != want {
		t.Fatalf("claim past the give-up age: claimed %+v, gave up %+v; want it failed with %q", claimed, gaveUp, want)
	}
	ns := mustNotifications(t, p, ids[0])
	if ns[0].Status != lease.NotificationPending || ns[1].Status != lease.NotificationFailed || ns[1].Detail != want {
		t.Errorf("notifications after giving up: %+v", ns)
	}
}
