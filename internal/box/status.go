package box

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// Wait bounds how long a shim may take to build its box: binding a path
// on a file system that hangs (a dead NFS server) must not hang a start.
const Wait = 10 * time.Second

// Status is the pipe on which a shim says whether its box is in force:
// a message when it failed, nothing when it started the program (the
// pipe is closed by the exec).
type Status struct {
	r, w *os.File
}

// Prepare turns cmd into the shim that runs cmd's program in box s:
// shim (the qd executable) with Arg, the program and its arguments, s in
// the environment and the status pipe as descriptor 3. Call Started once
// cmd has been started (or failed to), then Wait.
func Prepare(cmd *exec.Cmd, s Spec, shim string) (*Status, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("create box status pipe: %w", err)
	}
	if len(cmd.ExtraFiles) > 0 {
		r.Close()
		w.Close()
		return nil, errors.New("box: the command already has extra files")
	}
	args := append([]string{shim, Arg, cmd.Path}, cmd.Args[1:]...)
	cmd.Path, cmd.Args, cmd.Err = shim, args, nil
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Env = append(append([]string{}, env...), Env+"="+s.Encode())
	cmd.ExtraFiles = []*os.File{w}
	return &Status{r: r, w: w}, nil
}

// Started closes this process's copy of the pipe's write end, so that
// the shim's exec (or exit) ends the pipe.
func (st *Status) Started() {
	if st.w != nil {
		st.w.Close()
		st.w = nil
	}
}

// Wait waits until the shim has started the program in its box (nil),
// said why it could not, or took longer than timeout. It closes the pipe.
func (st *Status) Wait(timeout time.Duration) error {
	st.Started()
	defer st.r.Close()
	_ = st.r.SetReadDeadline(time.Now().Add(timeout))
	msg, err := io.ReadAll(io.LimitReader(st.r, 4096))
	switch {
	case len(msg) > 0:
		return &Error{Msg: strings.TrimSpace(string(msg))}
	case errors.Is(err, os.ErrDeadlineExceeded):
		return &Error{Msg: fmt.Sprintf("the box was not ready after %s", timeout)}
	case err != nil:
		return &Error{Msg: "read the box's status: " + err.Error()}
	}
	return nil
}

// Error is why a shim could not put a program in its box; the program
// was not started.
type Error struct{ Msg string }

func (e *Error) Error() string { return "box: " + e.Msg }
