//go:build linux

package faults

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// mustSmallDisk mounts a tmpfs of size bytes at dir, unmounted when the test
// ends (after the daemons, which are registered later). It needs root; under
// CI it fails rather than skip.
func mustSmallDisk(t *testing.T, dir string, size int) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("mount a small tmpfs for the full-disk scenario: %v", err)
		}
		t.Skipf("mount a small tmpfs (needs root): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
}

// fillDisk writes 64 KiB files into dir until the file system is full and
// returns them.
func fillDisk(t *testing.T, dir string) []string {
	t.Helper()
	chunk := make([]byte, 64<<10)
	var files []string
	for i := 0; ; i++ {
		path := filepath.Join(dir, fmt.Sprintf("filler-%04d", i))
		err := os.WriteFile(path, chunk, 0o600)
		if err == nil {
			files = append(files, path)
			continue
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("fill the disk: %v", err)
		}
		// Keep what the last write put in: the disk is full to the page.
		return append(files, path)
	}
}

// Ensure a daemon whose state directory is on a full file system keeps
// running tasks, marks each run whose log file lacks output (a log written
// while the disk was full, and a 10 MiB one cut off when it filled), that
// qd logs then says the file is incomplete and why and shows the stored
// tail, that qd status shows the state directory failing writes, and that
// both clear once space is back.
func TestDisk_FullStateDir(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dir := testkit.MustShortDir(t, "qd-disk-")
	state := filepath.Join(dir, "state")
	mustSmallDisk(t, state, 4<<20)
	d := r.daemon("disk", r.agentHCL(agentConf{name: "w", lanes: []string{"disk"}}), testkit.DaemonOptions{Dir: dir})
	filler := fillDisk(t, state)
	fig.fault("full-state-disk", 1)

	logs := func(run int64) (string, string) {
		out, errOut, code := testkit.QD(t, r.qd, r.url, "logs", "--config", d.Config, strconv.FormatInt(run, 10))
		if code != 0 {
			t.Fatalf("qd logs %d: exit %d: %s", run, code, errOut)
		}
		return out, errOut
	}
	runOf := func(task int64) (run int64, logErr string) {
		r.scalar(&run, `SELECT id FROM {s}.runs WHERE task_id = $1`, task)
		r.scalar(&logErr, `SELECT coalesce(log_error, '') FROM {s}.runs WHERE id = $1`, run)
		return run, logErr
	}

	// The disk is full: a run's log file stays empty.
	full := r.enqueue("disk", "w", `{"mode":"line","bytes":2000,"marker":"while-full"}`, 1)
	r.waitStates("done", nil, 30*time.Second)
	run, logErr := runOf(full)
	if !strings.Contains(logErr, "no space left on device") {
		t.Errorf("run %d written while the disk was full: log_error %q, want ENOSPC", run, logErr)
	}
	out, errOut := logs(run)
	if !strings.Contains(errOut, "is incomplete") || !strings.Contains(errOut, "no space left on device") || !strings.Contains(out, "fakeagent done while-full") {
		t.Errorf("qd logs of run %d does not say the file is incomplete and show the tail:\nstderr: %s\nstdout: %.300q", run, errOut, out)
	}
	st := d.Status(t).StateDir
	if st.WriteError == "" || st.IncompleteLogs != 1 {
		t.Errorf("qd status while the disk is full: state dir %+v, want a write error and 1 incomplete log", st)
	}

	// 1 MiB free: a 10 MiB run's log is cut off part way.
	for _, f := range filler[:16] {
		os.Remove(f)
	}
	big := r.enqueue("disk", "w", `{"mode":"flood","bytes":10485760,"marker":"big"}`, 1)
	r.waitStates("done", nil, 60*time.Second)
	run, logErr = runOf(big)
	if logErr == "" {
		t.Errorf("10 MiB run %d cut off by the full disk has no log_error", run)
	}
	out, errOut = logs(run)
	if len(out) < 512<<10 || !strings.Contains(out, "[qd: log file incomplete") || !strings.HasSuffix(strings.TrimSpace(out), "fakeagent done big") {
		t.Errorf("qd logs of the cut-off run: %d bytes, want the partial file, a marker and the tail ending in the last line; stderr: %s", len(out), errOut)
	}

	// Space is back: the next run's log is whole and the error clears.
	for _, f := range filler[16:] {
		os.Remove(f)
	}
	ok := r.enqueue("disk", "w", `{"mode":"line","bytes":2000,"marker":"after"}`, 1)
	r.verify(expect{})
	run, logErr = runOf(ok)
	if logErr != "" {
		t.Errorf("run %d after space came back: log_error %q, want none", run, logErr)
	}
	if out, errOut := logs(run); strings.Contains(errOut, "incomplete") || !strings.Contains(out, "fakeagent done after") {
		t.Errorf("qd logs of a whole log: stderr %q, stdout %.200q", errOut, out)
	}
	if st := d.Status(t).StateDir; st.WriteError != "" || st.IncompleteLogs != 2 {
		t.Errorf("qd status once space is back: state dir %+v, want no write error and 2 incomplete logs", st)
	}
}
