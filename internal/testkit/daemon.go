package testkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
)

// Daemon is a `qd run` process started by a test.
type Daemon struct {
	Name     string
	Dir      string // holds qd.hcl, the socket and the state directory
	Config   string
	Socket   string
	StateDir string
	Cmd      *exec.Cmd

	log      *SyncBuffer
	cred     *syscall.Credential
	done     chan struct{}
	waitErr  error
	stopOnce sync.Once
}

// DaemonOptions tunes StartDaemon.
type DaemonOptions struct {
	// Env is added to the daemon's environment.
	Env []string
	// Dir reuses a directory (and so the state directory) of an earlier
	// daemon, as a restart would.
	Dir string
	// Stderr, when set, receives the daemon's stderr instead of the log
	// buffer (a pipe the test may stop reading); Log then holds stdout only.
	Stderr *os.File
	// NoWait returns as soon as the process started, for a daemon that is
	// expected to refuse to start (see Wait).
	NoWait bool
	// Credential, when set, runs the daemon as that user (the test runs
	// as root): its directory and config file are given to the user, and
	// bin must be a program the user may run.
	Credential *syscall.Credential
	// Prefix, when set, runs the daemon through a program that execs it
	// (prlimit --nofile=256 --): the daemon keeps the process id.
	Prefix []string
}

// StartDaemon writes a config made of the name, socket and state directory
// plus body (agent and periodic blocks, other settings), starts `qd run` on
// it with the database URL in QD_DATABASE_URL, and waits until its status
// socket answers. The daemon is killed when the test ends if still running.
func StartDaemon(tb testing.TB, bin, dbURL, name, body string, opt DaemonOptions) *Daemon {
	tb.Helper()
	dir := opt.Dir
	if dir == "" {
		dir = MustShortDir(tb, "qd-e2e-")
	}
	d := &Daemon{
		Name: name, Dir: dir,
		Config:   filepath.Join(dir, "qd.hcl"),
		Socket:   filepath.Join(dir, "qd.sock"),
		StateDir: filepath.Join(dir, "state"),
		log:      &SyncBuffer{},
		cred:     opt.Credential,
		done:     make(chan struct{}),
	}
	if c := d.cred; c != nil {
		if err := os.Chown(dir, int(c.Uid), int(c.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	d.WriteConfig(tb, body)
	args := append(append(slices.Clip(opt.Prefix), bin), "run", "--config", d.Config)
	d.Cmd = exec.Command(args[0], args[1:]...)
	if c := d.cred; c != nil {
		d.Cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c}
	}
	d.Cmd.Env = append(append(Environ(), "QD_DATABASE_URL="+dbURL), opt.Env...)
	d.Cmd.Stdout, d.Cmd.Stderr = d.log, d.log
	if opt.Stderr != nil {
		d.Cmd.Stderr = opt.Stderr
	}
	if err := d.Cmd.Start(); err != nil {
		tb.Fatalf("start qd run: %v", err)
	}
	go func() {
		d.waitErr = d.Cmd.Wait()
		close(d.done)
	}()
	tb.Cleanup(func() {
		d.Kill()
		if tb.Failed() {
			tb.Logf("daemon %s log:\n%s", name, d.Log())
		}
	})
	if opt.NoWait {
		return d
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := api.Client{Path: d.Socket}.Status(ctx)
		cancel()
		if err == nil {
			return d
		}
		select {
		case <-d.done:
			tb.Fatalf("qd run exited before its socket answered: %v\n%s", d.waitErr, d.Log())
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("qd run: socket %s did not answer within 20s: %v\n%s", d.Socket, err, d.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WriteConfig (re)writes the daemon's config file: its name, socket and
// state directory, then body. Send SIGHUP to have a running daemon read it.
func (d *Daemon) WriteConfig(tb testing.TB, body string) {
	tb.Helper()
	conf := fmt.Sprintf("name = %q\nsocket = %q\nstate_dir = %q\nlog_level = \"debug\"\n%s\n", d.Name, d.Socket, d.StateDir, body)
	tmp := d.Config + ".tmp"
	if err := os.WriteFile(tmp, []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	if c := d.cred; c != nil {
		if err := os.Chown(tmp, int(c.Uid), int(c.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	if err := os.Rename(tmp, d.Config); err != nil {
		tb.Fatal(err)
	}
}

// Log returns what the daemon has written so far.
func (d *Daemon) Log() string { return d.log.String() }

// PID is the daemon's process id.
func (d *Daemon) PID() int { return d.Cmd.Process.Pid }

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig syscall.Signal) { _ = d.Cmd.Process.Signal(sig) }

// Wait waits up to timeout for the daemon to exit and returns its exit code
// (-1 when killed by a signal); it fails the test on timeout.
func (d *Daemon) Wait(tb testing.TB, timeout time.Duration) int {
	tb.Helper()
	select {
	case <-d.done:
	case <-time.After(timeout):
		tb.Fatalf("daemon %s did not exit within %s\n%s", d.Name, timeout, d.Log())
	}
	var ee *exec.ExitError
	if errors.As(d.waitErr, &ee) {
		return ee.ExitCode()
	}
	return 0
}

// Exited reports whether the daemon has exited.
func (d *Daemon) Exited() bool {
	select {
	case <-d.done:
		return true
	default:
		return false
	}
}

// Kill sends SIGKILL and waits for the process to go.
func (d *Daemon) Kill() {
	d.stopOnce.Do(func() {
		_ = d.Cmd.Process.Kill()
	})
	<-d.done
}

// Status fetches the daemon's status snapshot.
func (d *Daemon) Status(tb testing.TB) *api.Snapshot {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := api.Client{Path: d.Socket}.Status(ctx)
	if err != nil {
		tb.Fatalf("status of %s: %v", d.Name, err)
	}
	return s
}

// WaitLog waits until the daemon's log contains text.
func (d *Daemon) WaitLog(tb testing.TB, text string, timeout time.Duration) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !strings.Contains(d.Log(), text) {
		if time.Now().After(deadline) {
			tb.Fatalf("daemon %s: %q not logged within %s\n%s", d.Name, text, timeout, d.Log())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// SyncBuffer is a bytes.Buffer safe for a process's output and a test
// reading it at once.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Eventually polls cond every 20ms until it holds or timeout passes.
func Eventually(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Alive reports whether a process with pid exists (and is not a zombie).
func Alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // not Linux: kill(0) is all we have
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}
