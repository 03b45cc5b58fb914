package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
)

// hangingWebhook answers no request: each waits until its client gives up.
func hangingWebhook(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var posts atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		_, _ = io.ReadAll(r.Body) // so that the server sees the client go
		<-r.Context().Done()
	}))
	t.Cleanup(hook.Close)
	return hook, &posts
}

// toldRecorder is an on_failure command that appends its notification id
// and task id to a file, one line per telling (one write: O_APPEND keeps
// lines whole).
func (r *rig) toldRecorder() (script, out string) {
	out = filepath.Join(r.dir, "told")
	script = testkit.MustScript(r.t, r.dir, "told.sh", `printf '%s %s %s\n' "$QD_NOTIFICATION_ID" "$QD_TASK_ID" "$QD_EVENT" >> `+out)
	return script, out
}

// told counts the recorder's lines per notification id and per task.
func told(t *testing.T, out string) (lines int, byNote, byTask map[string]int) {
	t.Helper()
	byNote, byTask = map[string]int{}, map[string]int{}
	b, _ := os.ReadFile(out)
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 {
			continue
		}
		lines++
		byNote[f[0]]++
		byTask[f[1]]++
	}
	return lines, byNote, byTask
}

// notifyBody is a config whose agent w (which claims nothing of lane
// "nb") tells its failures to script and hook, with short tries.
func (r *rig) notifyBody(script, hook string) string {
	return fmt.Sprintf("on_failure = [%q]\nwebhook = %q\nnotify_timeout = \"1s\"\nnotify_backoff = \"200ms\"\nnotify_give_up = \"8s\"\n",
		script, hook) + r.agentHCL(agentConf{name: "w", lanes: []string{"nb-idle"}})
}

// burst makes n tasks of agent w fail for good at once: claimed by the
// test and settled failed in one settlement, n failed events in one
// transaction.
func (r *rig) burst(n int) []int64 {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limit := n
	if _, err := r.prov.SetLane(ctx, lease.LaneUpdate{Name: "nb", MaxRunning: &limit}); err != nil {
		r.t.Fatal(err)
	}
	var ids []int64
	for range n {
		ids = append(ids, r.enqueue("nb", "w", `{}`, 1))
	}
	ls, err := r.prov.ClaimMany(ctx, lease.ClaimParams{Lanes: []string{"nb"}, Owner: "burst", Instance: "b", Lease: time.Minute}, n)
	if err != nil || len(ls) != n {
		r.t.Fatalf("claim the burst: %d runs, %v", len(ls), err)
	}
	var ss []lease.Settlement
	for _, l := range ls {
		ss = append(ss, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "exited 1: burst"})
	}
	if _, err := r.prov.Settle(ctx, ss...); err != nil {
		r.t.Fatal(err)
	}
	return ids
}

// noteCounts reads qd.notifications: rows by status, rows tried more than
// once, and the sum of their tries.
func (r *rig) noteCounts() (by map[string]int, retried, tries int) {
	r.t.Helper()
	by = map[string]int{}
	var status string
	var n, more, sum int
	r.eachRow(`SELECT status, count(*), count(*) FILTER (WHERE tries > 1), coalesce(sum(tries), 0) FROM {s}.notifications GROUP BY status`,
		func() { by[status] = n; retried += more; tries += sum }, &status, &n, &more, &sum)
	return by, retried, tries
}

// checkBurst waits until every notification of the burst is finished,
// then checks that none is lost: each task told to the command (and
// every command notification sent), every webhook notification failed for
// good after its tries. It returns the tellings beyond one per
// notification.
func (r *rig) checkBurst(ids []int64, out string, timeout time.Duration) (dups int) {
	r.t.Helper()
	n := len(ids)
	testkit.Eventually(r.t, timeout, "every notification finished", func() bool {
		by, _, _ := r.noteCounts()
		return by["sent"]+by["failed"] == 2*n
	})
	by, retried, tries := r.noteCounts()
	lines, byNote, byTask := told(r.t, out)
	lost := 0
	for _, id := range ids {
		if byTask[strconv.FormatInt(id, 10)] == 0 {
			lost++
		}
	}
	for _, k := range byNote {
		dups += k - 1
	}
	if lost > 0 || len(byNote) != n || by["sent"] != n || by["failed"] != n {
		r.t.Errorf("burst of %d: %d tasks never told, %d notifications told, rows %v; want every task told once, %d sent and %d failed for good",
			n, lost, len(byNote), by, n, n)
	}
	var hookFailed int
	r.scalar(&hookFailed, `SELECT count(*) FROM {s}.notifications WHERE target LIKE 'http://127.0.0.1:%/… [%]' AND status = 'failed' AND detail LIKE 'given up: not sent within 8s%'`)
	if hookFailed != n {
		r.t.Errorf("%d webhook notifications failed for good with their reason, want %d", hookFailed, n)
	}
	r.t.Logf("burst of %d: %d notifications recorded, %d sent, %d failed for good, %d tried more than once (%d tries), %d lines told, %d told twice, %d lost",
		n, by["sent"]+by["failed"], by["sent"], by["failed"], retried, tries, lines, dups, lost)
	fig.add(func(f *figures) {
		f.notesLost += lost
		f.notes = append(f.notes, fmt.Sprintf("burst of %d: %d recorded, %d sent, %d failed for good, %d retried, %d told twice, %d lost",
			n, by["sent"]+by["failed"], by["sent"], by["failed"], retried, dups, lost))
	})
	return dups
}

// Ensure a burst of 300 failures told to a command and to a webhook that
// hangs loses none: every command runs, without waiting on the webhook,
// and is told once; the webhook's notifications are retried and end failed
// for good, all recorded; qd status reports the webhook down and qd show
// lists both notifications of a task.
func TestNotify_Burst(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	hook, posts := hangingWebhook(t)
	script, out := r.toldRecorder()
	d := r.daemon("notify-burst", r.notifyBody(script, hook.URL+"/hooks/burst"), testkit.DaemonOptions{})
	begin := time.Now()
	ids := r.burst(300)
	testkit.Eventually(t, 60*time.Second, "every command told", func() bool { _, byNote, _ := told(t, out); return len(byNote) >= len(ids) })
	took := time.Since(begin)
	t.Logf("the 300 commands ran within %s of the burst; the webhook was posted to %d times meanwhile", took.Round(time.Millisecond), posts.Load())
	if took > 30*time.Second {
		t.Errorf("the commands took %s: they waited on the webhook", took)
	}
	hookName := lease.RedactWebhook(hook.URL + "/hooks/burst")
	testkit.Eventually(t, 10*time.Second, "qd status to report the webhook down", func() bool {
		s := d.Status(t)
		return len(s.Notifications.Down) == 1 && s.Notifications.Down[0].Target == hookName && s.Notifications.Sent > 0
	})
	if dups := r.checkBurst(ids, out, 90*time.Second); dups != 0 {
		t.Errorf("%d notifications told twice without any fault", dups)
	}
	var shown struct {
		Notifications []struct{ Target, Status, Detail string } `json:"notifications"`
	}
	if err := json.Unmarshal([]byte(testkit.MustQD(t, r.qd, r.url, "show", "--json", strconv.FormatInt(ids[0], 10))), &shown); err != nil {
		t.Fatal(err)
	}
	if ns := shown.Notifications; len(ns) != 2 || ns[0].Target != script || ns[0].Status != "sent" ||
		ns[1].Target != hookName || ns[1].Status != "failed" || !strings.HasPrefix(ns[1].Detail, "given up") {
		t.Errorf("qd show lists the task's notifications as %+v", ns)
	}
	fig.add(func(f *figures) {
		f.notes = append(f.notes, fmt.Sprintf("commands of a burst of 300 all ran within %s", took.Round(time.Millisecond)))
	})
	fig.fault("notification burst", 300)
}

// Ensure a daemon killed with SIGKILL in the middle of a burst, then
// restarted, loses no notification, and tells one twice only if the kill
// cut its try after the command ran (the try was claimed and unrecorded
// then; the second telling carries the same QD_NOTIFICATION_ID).
func TestNotify_BurstKill(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	hook, _ := hangingWebhook(t)
	script, out := r.toldRecorder()
	body := r.notifyBody(script, hook.URL+"/hooks/kill")
	d := r.daemon("notify-kill", body, testkit.DaemonOptions{})
	ids := r.burst(300)
	testkit.Eventually(t, 60*time.Second, "a third of the commands told", func() bool { _, byNote, _ := told(t, out); return len(byNote) >= 100 })
	d.Kill()
	var cut int
	r.scalar(&cut, `SELECT count(*) FROM {s}.notifications WHERE status = 'sending' AND target NOT LIKE 'http%'`)
	_, before, _ := told(t, out)
	t.Logf("killed with %d commands told and %d command notifications claimed and unrecorded", len(before), cut)
	r.daemon("notify-kill", body, testkit.DaemonOptions{Dir: d.Dir})
	dups := r.checkBurst(ids, out, 120*time.Second)
	if dups > cut {
		t.Errorf("%d notifications told twice, more than the %d whose try the kill cut", dups, cut)
	}
	fig.add(func(f *figures) { f.notesDups += dups })
	fig.fault("notification burst", 300)
}

// Ensure a task whose last attempt dies with its daemon (SIGKILL) is told
// failed once: by the restarted daemon, which abandons the dead one's
// run, and, with a second daemon sharing the queue, by whichever gets
// there first (the other reaps it once the lease expires), never twice.
func TestNotify_KilledOnLastAttempt(t *testing.T) {
	t.Parallel()
	for _, two := range []bool{false, true} {
		r := newRig(t)
		script, out := r.toldRecorder()
		body := fmt.Sprintf("on_failure = [%q]\n", script) + r.agentHCL(agentConf{name: "w", lanes: []string{"last"}, lease: "4s"})
		daemons := map[string]*testkit.Daemon{"notify-last-a": r.daemon("notify-last-a", body, testkit.DaemonOptions{})}
		if two {
			daemons["notify-last-b"] = r.daemon("notify-last-b", body, testkit.DaemonOptions{})
		}
		id := r.enqueue("last", "w", `{"ms":60000}`, 1)
		run, _ := r.waitEvent("start", id, 30*time.Second)
		var owner string
		r.scalar(&owner, `SELECT owner FROM {s}.runs WHERE id = $1`, run)
		holder := daemons[owner]
		holder.Kill()
		if !two {
			r.daemon(owner, body, testkit.DaemonOptions{Dir: holder.Dir})
		}
		r.waitStates("", map[int64]string{id: "failed"}, 30*time.Second)
		testkit.Eventually(t, 30*time.Second, "the failure told", func() bool { n, _, _ := told(t, out); return n >= 1 })
		time.Sleep(3 * time.Second) // a second telling would come by now
		lines, _, byTask := told(t, out)
		var rows int
		r.scalar(&rows, `SELECT count(*) FROM {s}.notifications WHERE task_id = $1 AND event = 'failed' AND status = 'sent'`, id)
		if lines != 1 || byTask[strconv.FormatInt(id, 10)] != 1 || rows != 1 {
			t.Errorf("two daemons %v: told %d times (%v), %d sent rows; want once", two, lines, byTask, rows)
		}
		fig.fault("notification daemon killed on a last attempt", 1)
	}
}
