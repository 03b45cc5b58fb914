package logsink

import (
	"bytes"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Ensure a Writer whose output nobody reads never blocks the writers:
// thousands of writes from many goroutines return at once, the ones that
// did not fit are counted, and once the output is read again the lines come
// through with a note of how many were dropped.
func TestWriter_BlockedOutput(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	// Fill the pipe so that any write to it blocks.
	pw.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	for {
		if _, err := pw.Write(make([]byte, 4096)); err != nil {
			break
		}
	}
	pw.SetWriteDeadline(time.Time{})
	w := New(pw, 16)
	start := time.Now()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				w.Write([]byte(strings.Repeat("x", g+i%7) + "\n"))
			}
		}()
	}
	wg.Wait()
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("4000 writes to a blocked output took %s", d)
	}
	// The drainer holds one line in its blocked write, the queue 16.
	if got := w.Dropped(); got < 4000-17 {
		t.Errorf("dropped %d of 4000 lines, want at least %d", got, 4000-17)
	}
	var out syncBuf
	go func() {
		buf := make([]byte, 64<<10)
		for {
			n, err := pr.Read(buf)
			out.Write(bytes.TrimLeft(buf[:n], "\x00"))
			if err != nil {
				return
			}
		}
	}()
	// The queue empties once the output is read again; then lines pass.
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(out.String(), "last\n"); {
		if time.Now().After(deadline) {
			t.Fatalf("lines did not come through once the output was read: %q", out.String())
		}
		w.Write([]byte("last\n"))
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "log lines dropped") {
		t.Errorf("output does not say lines were dropped: %q", out.String())
	}
	w.Close(time.Second)
	if _, err := w.Write([]byte("after close\n")); err != nil {
		t.Errorf("write after close: %v", err)
	}
}

// Ensure Close writes what was queued before it returns.
func TestWriter_CloseFlushes(t *testing.T) {
	var buf syncBuf
	w := New(&buf, 0)
	for range 100 {
		w.Write([]byte("line\n"))
	}
	w.Close(5 * time.Second)
	if got := strings.Count(buf.String(), "line\n"); got != 100 {
		t.Errorf("after Close: %d lines written, want 100", got)
	}
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
