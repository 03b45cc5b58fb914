package supervisor

import (
	"errors"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func TestChild_Stop(t *testing.T) {
	t.Run("TermBeforePID", func(t *testing.T) {
		// Ensure a stop with a grace asked for while the child starts is
		// sent as SIGTERM once it has a pid.
		t.Parallel()
		c := MustChild(t)
		cmd := MustGroup(t, "sleep 300")
		c.terminate(stopCancel, "cancelled", 0)
		c.setPID(cmd.Process.Pid)
		if got, want := MustSignal(t, cmd), syscall.SIGTERM; got != want {
			t.Fatalf("child ended by %v, want %v", got, want)
		}
	})

	t.Run("KillBeforePID", func(t *testing.T) {
		// Ensure a kill asked for while the child starts wins over an
		// earlier term and is sent once it has a pid.
		t.Parallel()
		c := MustChild(t)
		cmd := MustGroup(t, "trap '' TERM; sleep 300")
		c.terminate(stopShutdown, "supervisor shutdown", 0)
		c.kill(stopFenced, "killed")
		c.setPID(cmd.Process.Pid)
		if got, want := MustSignal(t, cmd), syscall.SIGKILL; got != want {
			t.Fatalf("child ended by %v, want %v", got, want)
		}
		if got, want := c.reason, stopFenced; got != want {
			t.Fatalf("reason = %q, want %q", got, want)
		}
	})

	t.Run("GraceOver", func(t *testing.T) {
		// Ensure a child that ignores SIGTERM gets SIGKILL once the grace
		// is over.
		t.Parallel()
		c := MustChild(t)
		ready := filepath.Join(t.TempDir(), "ready")
		cmd := MustGroup(t, "trap '' TERM; echo $$ > "+ready+"; while :; do sleep 0.1; done")
		c.setPID(cmd.Process.Pid)
		MustReadPID(t, ready)
		c.terminate(stopTimeout, "timed out", 200*time.Millisecond)
		if got, want := MustSignal(t, cmd), syscall.SIGKILL; got != want {
			t.Fatalf("child ended by %v, want %v", got, want)
		}
	})

	t.Run("NothingAfterReap", func(t *testing.T) {
		// Ensure that once the group is reaped no stop, timer or second
		// reap signals its pid, which may then be another process's (here
		// a live group stands for the process that got it), while a lost
		// lease is still recorded, so that nothing is settled.
		t.Parallel()
		c := MustChild(t)
		first := MustGroup(t, "exit 0")
		c.setPID(first.Process.Pid)
		MustDie(t, first.Process.Pid, "child")
		close(c.exited)
		c.reapGroup()
		first.Wait()
		other := MustGroup(t, "sleep 300")
		c.mu.Lock()
		c.pid = other.Process.Pid
		c.mu.Unlock()
		c.terminate(stopShutdown, "supervisor shutdown", time.Millisecond)
		c.kill(stopLeaseLost, "lease lost")
		c.graceIsOver(time.Millisecond)
		c.reapGroup()
		time.Sleep(100 * time.Millisecond)
		if !alive(other.Process.Pid) {
			t.Fatal("a reaped child's stop signalled the process that has its pid now")
		}
		if got, want := c.reason, stopLeaseLost; got != want {
			t.Fatalf("reason = %q, want %q", got, want)
		}
	})
}

// MustChild returns the handle of a child that has not started.
func MustChild(tb testing.TB) *child {
	tb.Helper()
	return &child{l: &lease.Lease{RunID: 1}, log: MustLogger(tb), out: newOutput(nil),
		exited: make(chan struct{}), done: make(chan struct{})}
}

// MustGroup starts sh -c script as the leader of a group of its own; the
// group is killed at cleanup unless the test waited for it.
func MustGroup(tb testing.TB, script string) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if cmd.ProcessState == nil {
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			cmd.Wait()
		}
	})
	return cmd
}

// MustSignal waits up to 10s for cmd to end and returns the signal that
// ended it.
func MustSignal(tb testing.TB, cmd *exec.Cmd) syscall.Signal {
	tb.Helper()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		tb.Fatal("child still running after 10s")
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		tb.Fatalf("child ended with %v, want a signal", err)
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		tb.Fatalf("child ended with %v, want a signal", err)
	}
	return ws.Signal()
}
