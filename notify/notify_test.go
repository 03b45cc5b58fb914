package notify

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// MustFailed makes n tasks of agent a that failed for good and returns
// their ids.
func MustFailed(tb testing.TB, q lease.Provider, n int) []int64 {
	tb.Helper()
	ctx := context.Background()
	if _, err := q.SetLane(ctx, lease.LaneUpdate{Name: "l", MaxRunning: ptr(n)}); err != nil {
		tb.Fatal(err)
	}
	var ids []int64
	for range n {
		id, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: "l", Agent: "a", MaxAttempts: 1})
		if err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	ls, err := q.ClaimMany(ctx, lease.ClaimParams{Owner: "d0", Instance: "i", Lease: time.Minute}, n)
	if err != nil || len(ls) != n {
		tb.Fatalf("claim: %d %v", len(ls), err)
	}
	var ss []lease.Settlement
	for _, l := range ls {
		ss = append(ss, lease.Settlement{RunID: l.RunID, Outcome: lease.RunFailed, Summary: "exited 1: boom"})
	}
	if _, err := q.Settle(ctx, ss...); err != nil {
		tb.Fatal(err)
	}
	return ids
}

func ptr[T any](v T) *T { return &v }

// MustRun starts s until the test ends.
func MustRun(tb testing.TB, s *Sender) {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
}

// notes lists the notifications of ids by status.
func notes(tb testing.TB, q lease.Provider, ids []int64) (map[lease.NotificationStatus]int, []lease.Notification) {
	tb.Helper()
	by := map[lease.NotificationStatus]int{}
	var all []lease.Notification
	for _, id := range ids {
		ns, err := q.Notifications(context.Background(), id)
		if err != nil {
			tb.Fatal(err)
		}
		for _, n := range ns {
			by[n.Status]++
			all = append(all, n)
		}
	}
	return by, all
}

func waitFor(tb testing.TB, d time.Duration, what string, cond func() bool) {
	tb.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", d, what)
		}
	}
}

// appender is a command that appends its QD_EVENT, QD_TASK_ID and the
// JSON it was given to out, one line per telling.
func appender(out string) Target {
	return Target{Command: []string{"/bin/sh", "-c", `line="$QD_EVENT $QD_TASK_ID $(cat)"; printf '%s\n' "$line" >> ` + out}}
}

func lines(tb testing.TB, path string) []string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// hangingHook is a webhook that answers nothing until released (never,
// when release is nil), then 200.
func hangingHook(t *testing.T, release <-chan struct{}) (*httptest.Server, *atomic.Int64) {
	var posts atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		_, _ = io.ReadAll(r.Body) // else its context never sees the client go
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hook.Close)
	return hook, &posts
}

// Ensure a burst of 300 failures told to a command and to two webhooks
// that hang loses none: every command runs, without waiting on the
// webhooks, each once; the notifications of the webhook that comes back
// are retried and all end sent; those of the one that stays down end
// failed for good once their give-up age passes, all recorded, and it is
// reported down.
func TestSender_Burst(t *testing.T) {
	const n = 300
	q := memlease.New()
	ids := MustFailed(t, q, n)
	release := make(chan struct{})
	down, downPosts := hangingHook(t, nil)
	back, backPosts := hangingHook(t, release)
	time.AfterFunc(time.Second, func() { close(release) })
	out := filepath.Join(t.TempDir(), "told")
	cmd, dead, flaky := appender(out), Target{Webhook: down.URL + "/hang"}, Target{Webhook: back.URL + "/later"}
	plan := Plan{Routes: []Route{{"a", lease.EventFailed, cmd}, {"a", lease.EventFailed, dead}, {"a", lease.EventFailed, flaky}},
		Timeout: 500 * time.Millisecond, Backoff: 100 * time.Millisecond, GiveUp: 6 * time.Second}
	s := New(Config{Queue: q, Daemon: "d1", Env: []string{"PATH=/usr/bin:/bin"}, Plan: func() Plan { return plan }, Poll: 50 * time.Millisecond})
	begin := time.Now()
	MustRun(t, s)
	waitFor(t, 30*time.Second, "every command", func() bool { return len(lines(t, out)) >= n })
	took := time.Since(begin)
	waitFor(t, 30*time.Second, "every notification finished", func() bool {
		by, _ := notes(t, q, ids)
		return by[lease.NotificationSent] == 2*n && by[lease.NotificationFailed] == n
	})
	seen := map[string]int{}
	for _, l := range lines(t, out) {
		seen[strings.Fields(l)[1]]++
	}
	if len(seen) != n {
		t.Errorf("the command was told of %d tasks, want %d", len(seen), n)
	}
	for id, k := range seen {
		if k != 1 {
			t.Errorf("the command was told of task %s %d times", id, k)
		}
	}
	_, all := notes(t, q, ids)
	retried := 0
	for _, x := range all {
		switch x.Target {
		case dead.String():
			if x.Status != lease.NotificationFailed || !strings.HasPrefix(x.Detail, "given up: not sent within 6s") {
				t.Errorf("notification %+v of the webhook that stays down, want failed for good", x)
			}
		case flaky.String():
			if x.Status != lease.NotificationSent {
				t.Errorf("notification %+v of the webhook that came back, want sent", x)
			}
			if x.Tries > 1 {
				retried++
			}
		}
	}
	c := s.Counts()
	if c.Sent != 2*n || c.Failed != n || len(c.Down) != 1 || c.Down[0].Target != dead.String() || !strings.Contains(c.Down[0].Error, "no answer within 500ms") {
		t.Errorf("counts: %+v", c)
	}
	if retried == 0 {
		t.Errorf("no notification of the webhook that came back was retried")
	}
	t.Logf("%d commands ran in %s; tried %d times the webhook that stayed down, %d the one that came back (%d notifications retried); %d failed tries retried",
		n, took.Round(time.Millisecond), downPosts.Load(), backPosts.Load(), retried, c.Retried)
	if took > 15*time.Second {
		t.Errorf("the commands took %s: they waited on the webhooks", took)
	}
}

// Ensure a command that leaves a helper running in the background (in
// its process group) is recorded sent, as its exit status says, with a
// note that what it left was killed, and that the helper is gone.
func TestSender_BackgroundHelper(t *testing.T) {
	q := memlease.New()
	ids := MustFailed(t, q, 1)
	pidFile := filepath.Join(t.TempDir(), "pid")
	cmd := Target{Command: []string{"/bin/sh", "-c", `sleep 60 & echo $! > ` + pidFile + `; echo told; exit 0`}}
	plan := Plan{Routes: []Route{{"a", lease.EventFailed, cmd}}}
	s := New(Config{Queue: q, Env: []string{"PATH=/usr/bin:/bin"}, Plan: func() Plan { return plan }, Poll: 50 * time.Millisecond})
	MustRun(t, s)
	begin := time.Now()
	waitFor(t, 10*time.Second, "the notification finished", func() bool {
		by, _ := notes(t, q, ids)
		return by[lease.NotificationSent]+by[lease.NotificationPending]+by[lease.NotificationFailed] == 1
	})
	_, all := notes(t, q, ids)
	t.Logf("recorded %+v", all[0])
	if n := all[0]; n.Status != lease.NotificationSent || !strings.Contains(n.Detail, "told") || !strings.Contains(n.Detail, "left processes running in its process group: killed") {
		t.Errorf("notification %+v, want sent with a note of what it left", n)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Errorf("recording took %s", d)
	}
	b, _ := os.ReadFile(pidFile)
	var pid int
	fmt.Sscan(string(b), &pid)
	waitFor(t, 5*time.Second, "the helper to be gone", func() bool { return pid > 0 && syscall.Kill(pid, 0) != nil })
}

// Ensure a command that fails is retried after the backoff, with the same
// notification id and the try counted, and that its second, successful
// try records it sent.
func TestSender_Retry(t *testing.T) {
	q := memlease.New()
	ids := MustFailed(t, q, 1)
	dir := t.TempDir()
	cmd := Target{Command: []string{"/bin/sh", "-c", `echo "$QD_NOTIFICATION_ID $QD_TRY" >> ` + dir + `/tries; test -e ` + dir + `/once || { touch ` + dir + `/once; echo down >&2; exit 3; }`}}
	plan := Plan{Routes: []Route{{"a", lease.EventFailed, cmd}}, Backoff: 300 * time.Millisecond}
	s := New(Config{Queue: q, Env: []string{"PATH=/usr/bin:/bin"}, Plan: func() Plan { return plan }, Poll: 50 * time.Millisecond})
	MustRun(t, s)
	waitFor(t, 10*time.Second, "the retry to be sent", func() bool {
		by, _ := notes(t, q, ids)
		return by[lease.NotificationSent] == 1
	})
	got := lines(t, filepath.Join(dir, "tries"))
	if len(got) != 2 || got[0] != "1 1" || got[1] != "1 2" {
		t.Errorf("tries told %q, want notification 1 on tries 1 and 2", got)
	}
	if c := s.Counts(); c.Sent != 1 || c.Retried != 1 || len(c.Down) != 0 {
		t.Errorf("counts %+v, want 1 sent after 1 retry, nothing down", c)
	}
}

// Ensure two senders sharing a queue (two daemons) tell each event once.
func TestSender_TwoSendersOnce(t *testing.T) {
	q := memlease.New()
	ids := MustFailed(t, q, 20)
	out := filepath.Join(t.TempDir(), "told")
	plan := Plan{Routes: []Route{{"a", lease.EventFailed, appender(out)}}}
	for _, name := range []string{"d1", "d2"} {
		MustRun(t, New(Config{Queue: q, Daemon: name, Env: []string{"PATH=/usr/bin:/bin"}, Plan: func() Plan { return plan }, Poll: 20 * time.Millisecond}))
	}
	waitFor(t, 20*time.Second, "every notification sent", func() bool {
		by, _ := notes(t, q, ids)
		return by[lease.NotificationSent] == len(ids)
	})
	time.Sleep(200 * time.Millisecond)
	if got := lines(t, out); len(got) != len(ids) {
		t.Errorf("told %d times for %d events", len(got), len(ids))
	}
}

// Ensure a webhook URL's password, user, path token and query appear
// nowhere the sender writes: not in the records (target and detail, even
// when the webhook's answer echoes its path), nor in the log.
func TestSender_WebhookRedacted(t *testing.T) {
	q := memlease.New()
	ids := MustFailed(t, q, 1)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such hook "+r.URL.String(), http.StatusNotFound)
	}))
	defer hook.Close()
	secret := strings.Replace(hook.URL, "http://", "http://qduser:Pa55word@", 1) + "/hooks/T000/S3CRETT0KEN?key=K3Yvalue"
	var logBuf bytes.Buffer
	var mu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: &lockedWriter{w: &logBuf, mu: &mu}, Level: hclog.Trace})
	plan := Plan{Routes: []Route{{"a", lease.EventFailed, Target{Webhook: secret}}}, Backoff: time.Hour}
	s := New(Config{Queue: q, Logger: logger, Plan: func() Plan { return plan }, Poll: 50 * time.Millisecond})
	MustRun(t, s)
	waitFor(t, 10*time.Second, "the failed try recorded", func() bool {
		by, _ := notes(t, q, ids)
		return by[lease.NotificationPending] == 1 && s.Counts().Retried == 1
	})
	_, all := notes(t, q, ids)
	mu.Lock()
	places := map[string]string{"target": all[0].Target, "detail": all[0].Detail, "log": logBuf.String()}
	mu.Unlock()
	for where, text := range places {
		for _, part := range []string{"qduser", "Pa55word", "T000", "S3CRETT0KEN", "K3Yvalue"} {
			if strings.Contains(text, part) {
				t.Errorf("the %s shows %q: %s", where, part, text)
			}
		}
	}
	if !strings.Contains(all[0].Detail, "404") || !strings.HasPrefix(all[0].Target, strings.TrimSuffix(hook.URL, "/")+"/… [") {
		t.Errorf("record %+v, want the answer and the redacted target", all[0])
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Ensure the retry schedule doubles from the plan's backoff and stops
// growing at MaxBackoff.
func TestPlan_RetryIn(t *testing.T) {
	for _, tt := range []struct {
		backoff time.Duration
		tries   int
		want    time.Duration
	}{
		{0, 1, 30 * time.Second},
		{0, 2, time.Minute},
		{0, 4, 4 * time.Minute},
		{0, 8, time.Hour},
		{0, 30, time.Hour},
		{time.Second, 3, 4 * time.Second},
	} {
		if got := (Plan{Backoff: tt.backoff}).retryIn(tt.tries); got != tt.want {
			t.Errorf("retryIn(backoff %s, try %d) = %s, want %s", tt.backoff, tt.tries, got, tt.want)
		}
	}
}

// Ensure a sender whose plan has no routes sleeps instead of polling the
// queue, and that once a reload gives it a route and kicks it, it tells
// the failure that waited.
func TestSender_IdleWithoutRoutes(t *testing.T) {
	q := memlease.New()
	ids := MustFailed(t, q, 1)
	dir := t.TempDir()
	var mu sync.Mutex
	var plan Plan
	var reads int
	s := New(Config{Queue: q, Env: []string{"PATH=/usr/bin:/bin"}, Poll: 20 * time.Millisecond, Plan: func() Plan {
		mu.Lock()
		defer mu.Unlock()
		reads++
		return plan
	}})
	MustRun(t, s)
	time.Sleep(300 * time.Millisecond)
	mu.Lock()
	if reads > 1 {
		t.Errorf("a sender with no routes read its plan %d times in 300ms, polling every 20ms", reads)
	}
	plan = Plan{Routes: []Route{{"a", lease.EventFailed, Target{Command: []string{"/bin/sh", "-c", "touch " + dir + "/told"}}}}}
	mu.Unlock()
	s.Kick()
	waitFor(t, 10*time.Second, "the failure to be told", func() bool {
		by, _ := notes(t, q, ids)
		return by[lease.NotificationSent] == 1
	})
}
