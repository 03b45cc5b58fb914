package supervisor

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/qd-run/qd/lease"
	"golang.org/x/sys/unix"
)

// Start runs the task of l as a child now. It returns ErrShuttingDown once
// Drain has begun, an error matching ErrNoResources when the daemon ran out
// of what it needs to start a child, and another error when the child could
// not be started; in each case it settles the run itself (abandoned and
// refunded in the first two, else failed with a summary naming the program
// and the errno).
func (s *Supervisor) Start(l *lease.Lease, spec Spec) error {
	spec = spec.withDefaults()
	c := s.newChild(l, spec)
	s.mu.Lock()
	if _, dup := s.children[l.RunID]; dup {
		s.mu.Unlock()
		return fmt.Errorf("start run %d: already running", l.RunID)
	}
	if s.draining {
		s.mu.Unlock()
		go s.release(c, "supervisor shutdown")
		return fmt.Errorf("start run %d: %w", l.RunID, ErrShuttingDown)
	}
	if late := time.Duration(s.mono() - c.hb.deadline); late >= 0 {
		// The claim's answer came after the run's local deadline (it waited
		// on a lock, or the network held the reply): the lease cannot be
		// shown to still hold, so the child is never started.
		s.mu.Unlock()
		waited := time.Duration(c.startNs - c.hb.sentAt).Round(time.Millisecond)
		go s.release(c, fmt.Sprintf("given back unstarted: the claim took %s, past the run's local lease deadline", waited))
		c.log.Warn("claim answered after the run's local lease deadline; giving the task back unstarted, its attempt refunded",
			"claim_took", waited, "lease", spec.Lease)
		return nil
	}
	s.children[l.RunID] = c
	s.mu.Unlock()
	if err := s.launch(c); err != nil {
		close(c.exited)
		if errno, ok := ownFault(err); ok {
			c.log.Warn("cannot start child: the daemon is out of resources; giving the run back unstarted, its attempt refunded",
				"error", err, "errno", unix.ErrnoName(errno))
			go s.finish(c, lease.GiveBack(l, bound("given back unstarted: the daemon could not start it: "+startFailure(l, spec, err).Summary)), true)
			return fmt.Errorf("%w: %w", ErrNoResources, err)
		}
		c.log.Error("cannot start child", "error", err)
		go s.finish(c, startFailure(l, spec, err), true)
		return fmt.Errorf("start run %d: %w", l.RunID, err)
	}
	c.log.Info("child started", "pid", c.pid, "command", spec.Command)
	s.poke()
	return nil
}

// release gives back a run that was never started, its attempt refunded:
// the supervisor is shutting down, or the claim answered too late.
func (s *Supervisor) release(c *child, summary string) {
	if err := s.GiveBack(c.l, summary); err != nil {
		c.log.Error("give back unstarted run", "summary", summary, "error", err)
	}
}

// GiveBack gives back the run of l, which no child of this supervisor
// runs, unstarted and with its attempt refunded (lease.GiveBack); summary
// says why. It calls the provider itself, with a timeout of its own: the
// settler may be gone. A refusal as lease lost is returned; it leaves the
// run to the reaper, which changes nothing for a child that never ran.
func (s *Supervisor) GiveBack(l *lease.Lease, summary string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs, err := s.cfg.Provider.Settle(ctx, lease.GiveBack(l, bound(summary)))
	if err == nil && len(errs) > 0 {
		err = errs[0]
	}
	return err
}

func (s *Supervisor) newChild(l *lease.Lease, spec Spec) *child {
	now := s.mono()
	sent := now
	if !spec.Claimed.IsZero() {
		sent = min(now, int64(spec.Claimed.Sub(s.epoch)))
	}
	c := &child{
		l: l, spec: spec, started: time.Now(), startNs: now, token: rand.Text(),
		log:     s.log.With("run_id", l.RunID, "task_id", l.TaskID, "agent", spec.Agent),
		out:     newOutput(nil),
		outDone: make(chan struct{}),
		exited:  make(chan struct{}),
		done:    make(chan struct{}),
	}
	// The first heartbeat comes soon, whatever the interval: it records
	// the child's pid on the run, which qd runs and psql show from then on.
	c.hb = beatState{sentAt: sent, ackAt: sent, expires: l.LeaseExpiresAt,
		deadline: sent + int64(spec.Lease-spec.margin()), next: sent + int64(min(firstBeat, spec.Heartbeat))}
	return c
}

// firstBeat bounds the wait for a run's first heartbeat.
const firstBeat = time.Second

// textBusyTries bounds the starts of a program that is busy being written.
const textBusyTries = 5

// launch opens the pipes and starts the child. The run log is created
// with the child's first output: a run that writes nothing has no log file
// (its empty tail is on the run row), and costs the file system nothing.
func (s *Supervisor) launch(c *child) error {
	if len(c.spec.Command) == 0 {
		return fmt.Errorf("agent %q has no command", c.spec.Agent)
	}
	var ends [6]*os.File // stdin r/w, stdout r/w, stderr r/w
	// A payload written at once (see pump) needs no poller.
	var err error
	ends[1], ends[0], err = childPipe(false, len(c.l.Payload) > smallPayload)
	if err == nil {
		ends[2], ends[3], err = childPipe(true, true)
	}
	if err == nil && !c.spec.MergeOutput {
		ends[4], ends[5], err = childPipe(true, true)
	}
	if err != nil {
		closeAll(nil, ends[:]...)
		return fmt.Errorf("create pipe: %w", err)
	}
	if c.spec.Workdir {
		if err = s.makeWorkdir(c); err != nil {
			closeAll(nil, ends[:]...)
			return err
		}
	}
	if err = s.prepareResults(c); err != nil {
		closeAll(nil, ends[:]...)
		s.dropWorkdir(c)
		dropResults(c)
		return err
	}
	env := childEnv(os.Environ(), c.l, c.spec, c.token, c.workdir)
	env = append(env, ResultEnv+"="+c.resultFile)
	if c.parentsFile != "" {
		env = append(env, ParentResultsEnv+"="+c.parentsFile)
	}
	var cmd *exec.Cmd
	if err = s.contain(c); err != nil {
		closeAll(nil, ends[:]...)
		s.dropWorkdir(c)
		return err
	}
	stderr := ends[5]
	if c.spec.MergeOutput {
		stderr = ends[3] // one pipe: the log keeps the order of both
	}
	for try := 1; ; try++ {
		cmd, err = s.spawnChild(c, env, ends[0], ends[3], stderr)
		// ETXTBSY: the program is open for writing somewhere, often only
		// for the moment another child of this process, forked from
		// another spawner thread, takes to exec (it holds a copy of every
		// descriptor until then). A few quick tries ride that out.
		if !errors.Is(err, syscall.ETXTBSY) || try == textBusyTries {
			break
		}
		time.Sleep(time.Duration(try) * time.Millisecond)
	}
	closeAll(nil, ends[0], ends[3], ends[5]) // the child's ends
	if err != nil {
		closeAll(nil, ends[1], ends[2], ends[4])
		s.dropWorkdir(c)
		dropResults(c)
		if c.cg != nil {
			c.cg.end(c.log)
			c.mu.Lock()
			c.cg = nil
			c.mu.Unlock()
		}
		return err
	}
	c.cmd, c.stdin, c.pipes = cmd, ends[1], [2]*os.File{ends[2], ends[4]}
	path := LogPath(s.cfg.StateDir, c.l.RunID)
	c.out.open = func() (io.Writer, error) {
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open run log: %w", err)
		}
		c.logFile = f // read by wait once the output is drained
		return f, nil
	}
	c.out.openStreams = func() (io.Writer, error) {
		f, err := os.OpenFile(StreamsPath(s.cfg.StateDir, c.l.RunID), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, fmt.Errorf("open stream record: %w", err)
		}
		c.streamsFile = f
		return f, nil
	}
	c.setPID(cmd.Process.Pid)
	s.record(c)
	s.pump(c)
	go s.wait(c)
	return nil
}

// spawnChild starts c's program with env and the child's ends of its
// pipes, as its user, in its cgroup and, when it has one, in its box: it
// returns once the program runs in it (see awaitBox).
func (s *Supervisor) spawnChild(c *child, env []string, stdin, stdout, stderr *os.File) (*exec.Cmd, error) {
	cmd := exec.Command(c.spec.Command[0], c.spec.Command[1:]...)
	cmd.Dir, cmd.Env = c.spec.Dir, env
	if c.workdir != "" {
		cmd.Dir = c.workdir
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = sysProcAttr(&c.pidfd)
	if u := c.spec.User; u != nil && os.Geteuid() == 0 {
		credential(cmd.SysProcAttr, u) // any other daemon runs it as itself
	}
	st, err := s.boxed(c, cmd)
	if err != nil {
		return nil, err
	}
	cmd, err = spawnIn(c.cg, cmd)
	if st != nil {
		st.Started()
		if err == nil {
			err = awaitBox(c, cmd, st)
		} else {
			st.Wait(0)
		}
	}
	return cmd, err
}

// dropWorkdir removes the fresh working directory of a run that did not
// start.
func (s *Supervisor) dropWorkdir(c *child) {
	if c.workdir != "" {
		if err := removeTree(c.workdir); err != nil {
			c.log.Warn("remove the workdir of a run that did not start", "workdir", c.workdir, "error", err)
		}
	}
}

// smallPayload is the most a payload may hold to be written at once into
// the child's empty stdin pipe (PIPE_BUF: one page, which every pipe holds).
const smallPayload = 4096

// pump feeds the payload and reads the output, each from its own goroutine,
// so a child that never reads stdin blocks nothing.
func (s *Supervisor) pump(c *child) {
	feed := func() {
		if _, err := c.stdin.Write(c.l.Payload); err != nil && !errors.Is(err, os.ErrClosed) && !errors.Is(err, syscall.EPIPE) {
			c.log.Warn("write payload", "error", err)
		}
		c.stdin.Close()
	}
	if len(c.l.Payload) <= smallPayload {
		// A new pipe takes this much without waiting for the child to
		// read: no goroutine needed.
		feed()
	} else {
		go feed()
	}
	// The reader that finishes last says the output is drained.
	var open atomic.Int32
	for _, p := range c.pipes {
		if p != nil {
			open.Add(1)
		}
	}
	for i, p := range c.pipes {
		if p == nil {
			continue // merged output: stderr is the stdout pipe
		}
		go func() {
			c.out.copyFrom(p, i == 0, s.mono)
			if open.Add(-1) == 0 {
				close(c.outDone)
			}
		}()
	}
}

func closeAll(f *os.File, more ...*os.File) {
	if f != nil {
		f.Close()
	}
	for _, m := range more {
		if m != nil {
			m.Close()
		}
	}
}

// ErrNoResources: a child could not be started for want of something the
// daemon itself ran out of (descriptors, memory, processes), not for
// anything of the agent's. Start gave the run back unstarted, its attempt
// refunded; starting another at once would most likely fail the same way.
var ErrNoResources = errors.New("the daemon is out of resources to start children")

// ownFault reports whether a start failed for the daemon's own want of
// resources (EMFILE, ENFILE, ENOMEM, EAGAIN from fork, ENOBUFS), and with
// which errno. EBADF counts too: the forked child moves its descriptors
// above the highest one open before exec, which fails so when that number
// is past the open-file limit. A missing or unrunnable program is the
// agent's fault.
func ownFault(err error) (syscall.Errno, bool) {
	var errno syscall.Errno
	if !errors.As(err, &errno) {
		return 0, false
	}
	switch errno {
	case syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EAGAIN, syscall.ENOBUFS, syscall.EBADF:
		return errno, true
	}
	return 0, false
}

// startFailure is the settlement of a child that could not be started.
func startFailure(l *lease.Lease, spec Spec, err error) lease.Settlement {
	prog := ""
	if len(spec.Command) > 0 {
		prog = spec.Command[0]
	}
	msg := err.Error()
	var pe *fs.PathError
	var ee *exec.Error
	switch {
	case errors.As(err, &pe):
		msg = fmt.Sprintf("start %s: %v", pe.Path, pe.Err)
	case errors.As(err, &ee):
		msg = fmt.Sprintf("start %s: %v", ee.Name, ee.Err)
	case prog != "":
		msg = fmt.Sprintf("start %s: %v", prog, err)
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		msg += " (" + unix.ErrnoName(errno) + ")"
	}
	return lease.Settlement{RunID: l.RunID, ClaimToken: l.ClaimToken, Outcome: lease.RunFailed, Summary: bound(msg),
		RetryIn: lease.Backoff(spec.RetryBackoff, l.Attempt)}
}

// bound cuts a summary to a sane length.
func bound(s string) string {
	const max = 500
	if len(s) <= max {
		return s
	}
	return clean([]byte(s[:max])) + "…"
}
