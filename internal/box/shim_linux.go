package box

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// statusFD is the shim's end of the status pipe (Prepare's ExtraFiles).
const statusFD = 3

// Main is the shim: the qd executable started as `qd __box PROGRAM
// ARGS...` by the supervisor (Prepare), as the run's own process (its
// pid, process group and cgroup), in the namespaces Attr asked for. It
// builds the box of the Spec in Env around itself, gives up every
// capability, sets no_new_privs, restricts itself with Landlock and
// execs PROGRAM. It never returns. When anything fails it writes why to
// the status pipe and exits 125 without starting PROGRAM; a successful
// exec closes the pipe (close-on-exec), which tells the supervisor that
// the box is in force.
func Main(args []string) {
	// Landlock, no_new_privs and capabilities belong to a thread: the one
	// that execs is the one that must hold them.
	runtime.LockOSThread()
	unix.CloseOnExec(statusFD)
	err := run(args)
	if err == nil { // a probe
		os.Exit(0)
	}
	status := os.NewFile(statusFD, "status")
	fmt.Fprint(status, err.Error())
	os.Exit(125)
}

func run(args []string) error {
	text, ok := os.LookupEnv(Env)
	if !ok {
		return fmt.Errorf("no box in $%s: only qd run starts the shim", Env)
	}
	s, err := Decode(text)
	if err != nil {
		return err
	}
	if len(args) == 0 && !s.Probe {
		return errors.New("no program to start")
	}
	abi := landlockABI()
	if abi < MinLandlock {
		return errors.New("the kernel has no Landlock")
	}
	r, err := plan(s, args)
	if err != nil {
		return err
	}
	if err := r.build(); err != nil {
		return err
	}
	if s.Net == NetNone {
		if err := loopbackUp(); err != nil {
			return err
		}
	}
	if err := dropCaps(); err != nil {
		return err
	}
	if err := confine(s, r, abi); err != nil {
		return err
	}
	if s.Probe {
		return nil
	}
	if err := unix.Chdir(s.Dir); err != nil {
		return fmt.Errorf("enter the working directory %s: %w", s.Dir, err)
	}
	env := childEnv(os.Environ())
	for try := 1; ; try++ {
		err = unix.Exec(args[0], args, env)
		// A program busy being written (see the supervisor's launch).
		if !errors.Is(err, unix.ETXTBSY) || try == 5 {
			break
		}
		time.Sleep(time.Duration(try) * time.Millisecond)
	}
	return fmt.Errorf("start %s in the box: %w", args[0], err)
}

// childEnv is the shim's environment without its Spec, with TMPDIR the
// box's own /tmp.
func childEnv(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, Env+"=") && !strings.HasPrefix(kv, "TMPDIR=") {
			out = append(out, kv)
		}
	}
	return append(out, "TMPDIR=/tmp")
}
