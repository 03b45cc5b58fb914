package ui_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
	"github.com/qd-run/qd/ui"
)

// openFDs counts this process's open descriptors.
func openFDs(tb testing.TB) int {
	tb.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		tb.Skipf("no /proc/self/fd: %v", err)
	}
	return len(ents)
}

// trickle opens a connection to addr, sends head, then one byte of body
// every 100ms until the server closes the connection or stop; it closes
// its end then.
func trickle(addr, head string, stop <-chan struct{}) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte(head)); err != nil {
		return nil
	}
	closed := make(chan struct{})
	go func() { // the server's close ends the read
		_, _ = c.Read(make([]byte, 4096))
		close(closed)
	}()
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return nil
		case <-closed:
			return nil
		case <-t.C:
			if _, err := c.Write([]byte("x")); err != nil {
				return nil
			}
		}
	}
}

// Ensure clients that trickle their headers or a POST's body are cut off
// by the read timeouts, and that no more than Limits.Conns connections
// are held at once: 300 trickling clients cost the dashboard at most its
// cap in descriptors, and none once the timeouts have passed.
func TestServe_SlowClients(t *testing.T) {
	p, _ := MustProvider(t)
	const conns = 60
	base := MustServer(t, p, ui.Options{Limits: ui.Limits{Conns: conns, ReadHeader: time.Second, Read: 2 * time.Second, Idle: time.Second}})
	addr := strings.TrimPrefix(base, "http://")
	before := openFDs(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients = 300
	for i := range clients {
		head := "GET / HTTP/1.1\r\nHost: " + addr + "\r\nX-Slow: "
		if i%2 == 1 {
			head = "POST /actions/enqueue HTTP/1.1\r\nHost: " + addr + "\r\nSec-Fetch-Site: same-origin\r\n" +
				"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 100000\r\n\r\nagent=w&lane=slow&payload="
		}
		wg.Go(func() {
			if err := trickle(addr, head, stop); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	during := openFDs(t)
	t.Logf("descriptors: %d before, %d with %d trickling clients (theirs included)", before, during, clients)
	if held := during - before - clients; held > conns+5 {
		t.Errorf("the dashboard holds %d descriptors for %d trickling clients, more than its cap of %d", held, clients, conns)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done: // every client was cut off, and closed its end
	case <-time.After(30 * time.Second):
		close(stop)
		<-done
		t.Fatalf("trickling clients still held after 30s; %d descriptors open, %d before", openFDs(t), before)
	}
	if after := openFDs(t); after > before+5 {
		t.Errorf("descriptors: %d before the slow clients, %d after they were cut off", before, after)
	}
	if code, _ := MustGet(t, base, "/api/overview"); code != http.StatusOK {
		t.Errorf("after the slow clients: status %d", code)
	}
	var n int
	_ = p.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+p.Schema()+".tasks").Scan(&n)
	if n != 0 {
		t.Errorf("a trickled body enqueued %d tasks", n)
	}
}

// Ensure a live stream outlives the read and write timeouts that end
// other requests: it still pushes a change seconds after both passed.
func TestServe_StreamOutlivesTimeouts(t *testing.T) {
	p, _ := MustProvider(t)
	base := MustServer(t, p, ui.Options{Limits: ui.Limits{Read: 500 * time.Millisecond, Write: 500 * time.Millisecond, Idle: 500 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	events := make(chan string, 100)
	go func() {
		defer close(events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			events <- sc.Text()
		}
	}()
	time.Sleep(2 * time.Second)
	id := MustEnqueueJSON(t, p, "late", `{}`)
	want := fmt.Sprintf(`id="task-%d"`, id)
	for line := range events {
		if strings.Contains(line, want) {
			return
		}
	}
	t.Fatalf("the stream ended before task %d, enqueued past its timeouts, appeared: %v", id, ctx.Err())
}

// gatedStore holds every FindTasks until its gate opens: a page load that
// takes as long as the test says.
type gatedStore struct {
	*pg.Provider
	gate    chan struct{}
	started chan struct{}
}

func (g gatedStore) FindTasks(ctx context.Context, q lease.TaskQuery) ([]lease.Task, error) {
	g.started <- struct{}{}
	select {
	case <-g.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return g.Provider.FindTasks(ctx, q)
}

// Ensure page loads and live streams past their caps are answered 503
// with a Retry-After, and that the loads holding the slots still finish.
func TestUI_Caps(t *testing.T) {
	p, _ := MustProvider(t)
	g := gatedStore{Provider: p, gate: make(chan struct{}), started: make(chan struct{}, 10)}
	d, err := ui.New(ui.Options{Store: g, Listen: "127.0.0.1:0", Limits: ui.Limits{Pages: 2, Streams: 3, Wait: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var served sync.WaitGroup
	served.Go(func() { _ = d.Serve(ctx, ln) })
	defer served.Wait()
	defer cancel()
	base := "http://" + ln.Addr().String()

	codes := make(chan int, 2)
	for range 2 {
		go func() { code, _ := MustGet(t, base, "/api/tasks"); codes <- code }()
		<-g.started
	}
	req, _ := http.NewRequest(http.MethodGet, base+"/api/tasks", nil)
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Errorf("a third page load while two hold the slots: status %d, Retry-After %q; want 503 with one", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	close(g.gate)
	for range 2 {
		if code := <-codes; code != http.StatusOK {
			t.Errorf("a page load holding a slot: status %d, want 200", code)
		}
	}

	var streams []*http.Response
	defer func() {
		for _, r := range streams {
			r.Body.Close()
		}
	}()
	for i := range 4 {
		req, _ := http.NewRequest(http.MethodGet, base+"/timeline", nil)
		req.Header.Set("Accept", "text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, resp)
		want := http.StatusOK
		if i == 3 {
			want = http.StatusServiceUnavailable
		}
		if resp.StatusCode != want || (i == 3 && resp.Header.Get("Retry-After") == "") {
			t.Errorf("stream %d of a cap of 3: status %d, Retry-After %q; want %d", i+1, resp.StatusCode, resp.Header.Get("Retry-After"), want)
		}
	}
}
