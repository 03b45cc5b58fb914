// Package logsink is the daemon's log output: a writer that never blocks
// its caller. Lines go through a bounded queue to the real output (stderr)
// from a goroutine of their own; when the queue is full, because nobody
// reads the output (a terminal paused with Ctrl-S, a stuck pipe, a stalled
// log driver), lines are dropped and counted instead of stopping whoever
// logged. Nothing on the lease path may wait on log output.
//
// It imports nothing from qd.
package logsink

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultLines is the queue's length in lines: a start-up's worth, or a
// burst of runs (two lines each).
const DefaultLines = 256

// Writer queues each Write for out and returns at once.
type Writer struct {
	out     io.Writer
	queue   chan []byte
	dropped atomic.Uint64
	noted   uint64 // dropped lines already reported in the output
	done    chan struct{}

	mu     sync.RWMutex // held to read closed and send, taken to close
	closed bool
}

// New starts a Writer to out holding up to lines writes.
func New(out io.Writer, lines int) *Writer {
	if lines <= 0 {
		lines = DefaultLines
	}
	w := &Writer{out: out, queue: make(chan []byte, lines), done: make(chan struct{})}
	go w.drain()
	return w
}

// Write queues a copy of p, or drops it when the queue is full. It never
// blocks and never fails.
func (w *Writer) Write(p []byte) (int, error) {
	b := append([]byte(nil), p...)
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		w.dropped.Add(1)
		return len(p), nil
	}
	select {
	case w.queue <- b:
	default:
		w.dropped.Add(1)
	}
	return len(p), nil
}

// Dropped is the number of writes dropped so far.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

func (w *Writer) drain() {
	defer close(w.done)
	for b := range w.queue {
		if n := w.dropped.Load(); n > w.noted {
			fmt.Fprintf(w.out, "[qd: %d log lines dropped: the log output was not being read]\n", n-w.noted)
			w.noted = n
		}
		_, _ = w.out.Write(b)
	}
}

// Close stops taking lines and waits up to timeout for the queued ones to
// be written. Writes after Close are dropped.
func (w *Writer) Close(timeout time.Duration) {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.queue)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-time.After(timeout):
	}
}
