package notify

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// Ensure Notify never waits: with nobody sending, it returns at once for
// every event past the queue's length, dropping and counting them.
func TestSender_FullQueueDrops(t *testing.T) {
	s := New(Config{Recorder: memlease.New()})
	begin := time.Now()
	for i := range QueueLen + 10 {
		s.Notify(Event{Event: "failed", RunID: int64(i)}, Target{Webhook: "http://127.0.0.1:9/"})
	}
	if d := time.Since(begin); d > time.Second {
		t.Errorf("queueing %d notifications took %s", QueueLen+10, d)
	}
	if _, _, dropped := s.Counts(); dropped != 10 {
		t.Errorf("dropped %d, want 10", dropped)
	}
}

// Ensure a notification is sent once per run, event and target even when
// it is queued twice (as two daemons would), that a command gets the JSON
// and the QD_ variables, and that a webhook's refusal is recorded as
// failed with its answer.
func TestSender_OnceAndRecorded(t *testing.T) {
	q := memlease.New()
	ctx := context.Background()
	id, _, err := q.Enqueue(ctx, lease.EnqueueParams{Lane: "l", Agent: "a", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "told")
	var mu sync.Mutex
	posts := 0
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		posts++
		mu.Unlock()
		http.Error(w, "no such channel", http.StatusNotFound)
	}))
	defer hook.Close()
	s := New(Config{Recorder: q, Daemon: "d1", Env: []string{"PATH=/usr/bin:/bin"}})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go s.Run(ctx)
	e := Event{Event: "failed", TaskID: id, RunID: 7, Agent: "a", Summary: "exited 1: boom"}
	cmd := Target{Command: []string{"/bin/sh", "-c", `{ echo "$QD_EVENT $QD_TASK_ID $QD_SUMMARY"; cat; } >> ` + out}}
	for range 2 {
		s.Notify(e, cmd, Target{Webhook: hook.URL})
	}
	var ns []lease.Notification
	for deadline := time.Now().Add(10 * time.Second); ; {
		ns, _ = q.Notifications(ctx, id)
		if len(ns) == 2 && ns[0].Status != lease.NotificationSending && ns[1].Status != lease.NotificationSending {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("notifications never finished: %+v", ns)
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a second sending would show by now
	b, _ := os.ReadFile(out)
	if got := string(b); strings.Count(got, "failed ") != 1 || !strings.Contains(got, "failed 1 exited 1: boom") || !strings.Contains(got, `"summary":"exited 1: boom"`) {
		t.Errorf("the command was told:\n%s", got)
	}
	mu.Lock()
	if posts != 1 {
		t.Errorf("the webhook was posted to %d times, want once", posts)
	}
	mu.Unlock()
	if ns[0].Status != lease.NotificationSent || ns[1].Status != lease.NotificationFailed || !strings.Contains(ns[1].Detail, "no such channel") {
		t.Errorf("records: %+v", ns)
	}
	if sent, failed, _ := s.Counts(); sent != 1 || failed != 1 {
		t.Errorf("counts: sent %d failed %d, want 1 and 1", sent, failed)
	}
}
