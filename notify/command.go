package notify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// outputGrace is how long a command's output is read after it exited and
// its process group was emptied: only a process that left the group (its
// own session, say) still holds it then.
const outputGrace = time.Second

// command runs argv with body on stdin, in a process group of its own.
// Its exit status decides: 0 is sent. Whatever it leaves running in its
// group when it exits is killed, and the detail says so; it never holds up
// the record. On a timeout (ctx) the whole group is killed.
func (s *Sender) command(ctx context.Context, argv, event []string, body []byte, timeout time.Duration) (string, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return "", fmt.Errorf("%s: output pipe: %w", argv[0], err)
	}
	defer outR.Close()
	inR, inW, err := os.Pipe()
	if err != nil {
		outW.Close()
		return "", fmt.Errorf("%s: input pipe: %w", argv[0], err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append([]string{}, s.cfg.Env...), event...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	cmd.SysProcAttr = procAttr()
	err = spawn(cmd)
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		return "", fmt.Errorf("start %s: %w", argv[0], err)
	}
	go func() { _, _ = inW.Write(body); inW.Close() }() // the group's end closes it at the latest
	output := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(outR, detailMax))
		_, _ = io.Copy(io.Discard, outR)
		output <- strings.TrimSpace(string(b))
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	pgid := cmd.Process.Pid
	var werr error
	timedOut := false
	select {
	case werr = <-exited:
	case <-ctx.Done():
		timedOut = true
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		werr = <-exited
	}
	var notes []string
	if !timedOut && syscall.Kill(-pgid, 0) == nil {
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		notes = append(notes, "it left processes running in its process group: killed")
	}
	var out string
	select {
	case out = <-output:
	case <-time.After(outputGrace):
		outR.Close()
		out = <-output
		notes = append(notes, "its output was still held open by a process outside its group: no longer read")
	}
	detail := strings.Join(append([]string{out}, notes...), "; ")
	detail = strings.TrimPrefix(detail, "; ")
	switch {
	case timedOut:
		return detail, fmt.Errorf("%s did not finish within %s: its process group was killed", argv[0], timeout)
	case werr != nil:
		var ee *exec.ExitError
		if errors.As(werr, &ee) {
			return detail, fmt.Errorf("%s %s", argv[0], exitText(ee))
		}
		return detail, fmt.Errorf("%s: %w", argv[0], werr)
	}
	return detail, nil
}

// exitText says how a process ended: "exited 3" or "killed by SIGTERM".
func exitText(ee *exec.ExitError) string {
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return "killed by " + signalName(ws.Signal())
	}
	return fmt.Sprintf("exited %d", ee.ExitCode())
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGINT:
		return "SIGINT"
	}
	return sig.String()
}
