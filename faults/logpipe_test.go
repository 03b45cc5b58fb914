package faults

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// stderrPipe is a daemon's stderr that the test reads, then stops reading.
type stderrPipe struct {
	r, w *os.File
	mu   sync.Mutex
	buf  bytes.Buffer
	done chan struct{}
}

func newStderrPipe(t *testing.T) *stderrPipe {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	p := &stderrPipe{r: r, w: w}
	p.resume()
	return p
}

func (p *stderrPipe) resume() {
	p.r.SetReadDeadline(time.Time{})
	p.done = make(chan struct{})
	go func() {
		defer close(p.done)
		b := make([]byte, 64<<10)
		for {
			n, err := p.r.Read(b)
			p.mu.Lock()
			p.buf.Write(b[:n])
			p.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
}

// block stops reading and fills the pipe, so that the daemon's next write
// to its stderr would block.
func (p *stderrPipe) block() {
	p.r.SetReadDeadline(time.Now())
	<-p.done
	// The daemon's end is in blocking mode, as a terminal or a shell pipe
	// would be. Fill the pipe through a non-blocking description of its own.
	fd, err := syscall.Open(fmt.Sprintf("/proc/self/fd/%d", p.w.Fd()), syscall.O_WRONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		panic(err)
	}
	defer syscall.Close(fd)
	chunk := bytes.Repeat([]byte{'\n'}, 4096)
	for {
		if _, err := syscall.Write(fd, chunk); err != nil {
			break
		}
	}
}

func (p *stderrPipe) String() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.buf.String()
}

// Ensure a daemon whose stderr nobody reads (a paused terminal, a stuck
// pipe) keeps renewing its leases and keeps enforcing them: for a minute
// with a blocked stderr, a cancel and a timeout are carried out (both log
// from the heartbeat path), 400 quick runs go through, a long run's lease is renewed the whole time so
// a second daemon on the same lanes never takes its task, and qd status
// counts the dropped log lines.
func TestLog_BlockedStderr(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	long := r.enqueue("lp1", "w", `{"mode":"sleep","ms":62000}`, 3)
	cancelled := r.enqueue("lp2", "w", `{"mode":"sleep","ms":62000}`, 3)
	timedOut := r.enqueue("lp3", "t", `{"mode":"sleep","ms":62000}`, 1)
	// The lease is six heartbeats long: a blocked writer that stopped the
	// renewals lets it lapse within the minute watched below, while the
	// jitter of a loaded machine (renewals up to 2.75s apart seen with
	// every package's tests at once on two cores, 1s alone) does not.
	body := r.agentHCL(agentConf{name: "w", lanes: []string{"lp1", "lp2"}, parallel: 2, lease: "6s", heartbeat: "1s"}) +
		r.agentHCL(agentConf{name: "t", lanes: []string{"lp3"}, lease: "3s", heartbeat: "1s", extra: `timeout = "8s"`})
	// Quick runs on the blocked daemon alone: two log lines each, enough
	// to fill any log queue.
	quick := r.agentHCL(agentConf{name: "q", lanes: []string{"lq"}, command: []string{"/bin/true"}})
	pipe := newStderrPipe(t)
	a := r.daemon("logpipe", body+quick, testkit.DaemonOptions{Stderr: pipe.w})
	runLong, _ := r.waitEvent("start", long, 20*time.Second)
	r.waitEvent("start", cancelled, 5*time.Second)
	r.waitEvent("start", timedOut, 5*time.Second)
	pipe.block()
	fig.fault("blocked-log-writer", 1)
	blockedAt := r.dbNow()
	// A second daemon, logging normally, ready to take any lease that lapses.
	r.daemon("logpipe-b", body, testkit.DaemonOptions{})
	testkit.MustQD(t, r.qd, r.url, "cancel", strconv.FormatInt(cancelled, 10))
	for range 400 {
		r.enqueue("lq", "q", `{}`, 1)
	}
	deadline := time.Now().Add(time.Minute)
	longest := 0.0
	defer func() { t.Logf("longest silence of run %d: %.2fs", runLong, longest) }()
	for time.Now().Before(deadline) {
		var silent float64
		r.scalar(&silent, `SELECT extract(epoch FROM clock_timestamp() - last_heartbeat_at) FROM {s}.runs WHERE id = $1`, runLong)
		longest = max(longest, silent)
		// Renewals that stopped would leave the run silent for the rest of
		// the minute; a silence as long as the lease (6s) let it lapse.
		if silent >= 6 {
			t.Fatalf("run %d not renewed for %.1fs, as long as its lease, while the daemon's stderr was blocked", runLong, silent)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	snap, err := api.Client{Path: a.Socket}.Status(ctx)
	cancel()
	if err != nil {
		t.Fatalf("status while stderr is blocked: %v", err)
	}
	if snap.LogLinesDropped == 0 {
		t.Errorf("status shows no dropped log lines after a minute of blocked stderr")
	}
	pipe.resume()
	r.verify(expect{states: map[int64]string{cancelled: "cancelled", timedOut: "failed"}, timeout: 30 * time.Second})
	var others int
	r.scalar(&others, `SELECT count(*) FROM {s}.runs WHERE task_id = $1 AND id <> $2`, long, runLong)
	if others != 0 {
		t.Errorf("task %d ran %d more times while its first run was live", long, others)
	}
	var heartbeats time.Time
	r.scalar(&heartbeats, `SELECT last_heartbeat_at FROM {s}.runs WHERE id = $1`, runLong)
	if heartbeats.Sub(blockedAt) < 55*time.Second {
		t.Errorf("last heartbeat %s after stderr was blocked, want about a minute", heartbeats.Sub(blockedAt))
	}
	testkit.Eventually(t, 10*time.Second, "the dropped-lines note in the daemon's stderr", func() bool {
		return strings.Contains(pipe.String(), "log lines dropped")
	})
}
