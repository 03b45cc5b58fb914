package faults

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// rssLimit bounds the daemon's resident memory while a child floods it.
const rssLimit = 100 << 10 // KiB

// Ensure a child writing a gigabyte of output, and one writing a single
// endless line, are never blocked by the daemon, complete, and leave the
// daemon's memory bounded.
func TestFlood_OutputBoundedMemory(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	size := int64(1 << 30)
	lines := r.enqueue("flood1", "w", `{"mode":"flood","bytes":`+strconv.FormatInt(size, 10)+`}`, 1)
	line := r.enqueue("flood2", "w", `{"mode":"line","bytes":`+strconv.FormatInt(size/4, 10)+`}`, 1)
	d := r.daemon("flood", r.agentHCL(agentConf{name: "w", parallel: 2, lease: "30s", heartbeat: "5s"}), testkit.DaemonOptions{})
	fig.fault("output-flood", 2)
	var peak atomic.Int64
	stop := poll(20*time.Millisecond, func() {
		if kb := vmRSS(d.PID()); kb > peak.Load() {
			peak.Store(kb)
		}
	})
	r.waitStates("done", nil, 3*time.Minute)
	stop()
	fig.add(func(f *figures) { f.maxRSS = max(f.maxRSS, peak.Load()) })
	t.Logf("daemon peak RSS during the flood: %d MiB", peak.Load()>>10)
	if peak.Load() > rssLimit {
		t.Errorf("daemon RSS reached %d MiB under a flood of output, limit %d MiB", peak.Load()>>10, rssLimit>>10)
	}
	for _, id := range []int64{lines, line} {
		var run int64
		r.scalar(&run, `SELECT id FROM {s}.runs WHERE task_id = $1`, id)
		path := d.StateDir + "/runs/" + strconv.FormatInt(run, 10) + ".log"
		if fi, err := os.Stat(path); err != nil {
			t.Errorf("run log of task %d: %v", id, err)
		} else {
			os.Remove(path) // a gigabyte on disk
			t.Logf("run %d log: %d bytes", run, fi.Size())
		}
		var tail int
		r.scalar(&tail, `SELECT length(coalesce(output_tail, '')) FROM {s}.runs WHERE id = $1`, run)
		if tail == 0 || tail > 64<<10 {
			t.Errorf("run %d: output tail of %d characters, want a bounded, non-empty tail", run, tail)
		}
	}
	r.verify(expect{})
}

// vmRSS reads a process's resident set size in KiB; 0 when unknown.
func vmRSS(pid int) int64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
