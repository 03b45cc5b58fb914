package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// runCgroup is a slot: the cgroup of one run at a time.
type runCgroup struct {
	path   string
	fd     int // the open directory, for clone3
	events int // cgroup.events, read again with pread; -1 when not open
	cpu    int // cpu.stat, likewise
	// used is the slot's CPU time before its current run: cpu.stat counts
	// every run the slot has held.
	used time.Duration
	// keep: the slot may go back to the idle ones after its run.
	keep bool
	// killed: cgroup.kill was written to it; it is never reused.
	killed atomic.Bool
	tree   *cgroupTree

	// mu guards used and gen against a live read (liveCPU) while the run
	// ends; gen counts the runs that ended in the slot.
	mu  sync.Mutex
	gen int
}

// is reports whether the run's cgroup is the one at path; false for a run
// without one.
func (g *runCgroup) is(path string) bool { return g != nil && g.path == path }

// holder is the generation of the slot's current run, for liveCPU.
func (g *runCgroup) holder() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.gen
}

// liveCPU is the CPU time so far of the run that holds g as generation
// gen; nil once that run ended, or where it cannot be read.
func (g *runCgroup) liveCPU(gen int) *time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.gen != gen {
		return nil
	}
	d := g.totalCPU()
	if d != nil {
		*d -= g.used
	}
	return d
}

// cloneRefusals are the errors by which clone3 refuses to start a child in
// a cgroup: no clone3 (ENOSYS, also a seccomp filter's answer), no
// CLONE_INTO_CGROUP (EINVAL, EOPNOTSUPP), not permitted (EPERM, EACCES),
// a cgroup that may not hold processes (EBUSY). An exec failure may give
// some of them too: a try without clone3 tells.
var cloneRefusals = []syscall.Errno{syscall.ENOSYS, syscall.EINVAL, syscall.EOPNOTSUPP, syscall.EPERM, syscall.EACCES, syscall.EBUSY}

// spawn starts cmd in g: created in it by clone3, so that it never runs a
// moment outside, or where clone3 is refused (an older kernel, a seccomp
// filter), started and then moved in. It returns the command that runs:
// cmd, or a copy of it started again without clone3.
func (g *runCgroup) spawn(cmd *exec.Cmd) (*exec.Cmd, error) {
	if g.tree.noClone.Load() {
		if err := spawn(cmd); err != nil {
			return nil, err
		}
		return cmd, g.place(cmd)
	}
	plain := *cmd.SysProcAttr
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, g.fd
	err := spawn(cmd)
	var errno syscall.Errno
	if err == nil || !errors.As(err, &errno) || !slices.Contains(cloneRefusals, errno) {
		return cmd, err
	}
	// clone3 refused, or the program failed to execute: tell them apart by
	// trying once without.
	if plain.PidFD != nil {
		*plain.PidFD = -1
	}
	again := exec.Command(cmd.Path)
	again.Args, again.Env, again.Dir = cmd.Args, cmd.Env, cmd.Dir
	again.Stdin, again.Stdout, again.Stderr, again.ExtraFiles = cmd.Stdin, cmd.Stdout, cmd.Stderr, cmd.ExtraFiles
	again.SysProcAttr = &plain
	if err := spawn(again); err != nil {
		return nil, err
	}
	g.tree.noClone.Store(true)
	g.tree.log.Warn("cannot start children inside their cgroup (clone3 refused); moving each in as it starts, so that it runs outside for a moment",
		"error", errno.Error())
	return again, g.place(again)
}

// place moves the started child into g, then what it started before it
// was moved and that is still in its process group; on failure it kills
// and reaps the child.
func (g *runCgroup) place(cmd *exec.Cmd) error {
	pid := cmd.Process.Pid
	procs := filepath.Join(g.path, "cgroup.procs")
	err := writeFile(procs, strconv.Itoa(pid))
	if err == nil {
		members, _ := groupProcs(pid)
		for _, m := range members {
			if m.pid != pid {
				_ = writeFile(procs, strconv.Itoa(m.pid))
			}
		}
		return nil
	}
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	_ = cmd.Wait()
	if fd := cmd.SysProcAttr.PidFD; fd != nil && *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
	return fmt.Errorf("move child into cgroup %s: %w", g.path, err)
}

// kill kills every process in g. The slot is not given to another run
// after that: on Linux 6.18 at least, a cgroup once killed through
// cgroup.kill kills every process later started in it.
func (g *runCgroup) kill() error {
	g.killed.Store(true)
	return killCgroup(g.path)
}

func killCgroup(path string) error {
	err := writeFile(filepath.Join(path, "cgroup.kill"), "1")
	if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	// Before Linux 5.14: freeze, kill each, thaw.
	_ = writeFile(filepath.Join(path, "cgroup.freeze"), "1")
	defer writeFile(filepath.Join(path, "cgroup.freeze"), "0")
	for _, w := range readWords(filepath.Join(path, "cgroup.procs")) {
		if pid, err := strconv.Atoi(w); err == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return nil
}

// populated reports whether any process is still in the cgroup at path.
func populated(path string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(path, "cgroup.events"))
	if err != nil {
		return false, err
	}
	return eventsPopulated(b), nil
}

func eventsPopulated(b []byte) bool { return !bytes.Contains(b, []byte("populated 0")) }

// full reports whether any process is still in g, read through its open
// cgroup.events where it has one.
func (g *runCgroup) full() (bool, error) {
	if g.events < 0 {
		return populated(g.path)
	}
	var buf [128]byte
	n, err := unix.Pread(g.events, buf[:], 0)
	if err != nil {
		return false, fmt.Errorf("read %s/cgroup.events: %w", g.path, err)
	}
	return eventsPopulated(buf[:n]), nil
}

// killIfFull kills every process in g, if any is left: the usual end of a
// run leaves none, and the check is cheaper than the kill.
func (g *runCgroup) killIfFull() error {
	if full, err := g.full(); err == nil && !full {
		return nil
	}
	return g.kill()
}

// emptyWait bounds how long a killed cgroup may take to empty.
const emptyWait = 5 * time.Second

// waitEmpty kills the cgroup at path until no process is left in it, or
// emptyWait is over (a process stuck in the kernel): false then.
func waitEmpty(path string) bool {
	return waitEmptyBy(func() (bool, error) { return populated(path) }, func() error { return killCgroup(path) })
}

func waitEmptyBy(full func() (bool, error), kill func() error) bool {
	deadline := time.Now().Add(emptyWait)
	pause := time.Millisecond
	for {
		full, err := full()
		if err != nil || !full {
			return err == nil || errors.Is(err, os.ErrNotExist)
		}
		if time.Now().After(deadline) {
			return false
		}
		_ = kill()
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

// end kills what is left in g, reads what it measured and gives the slot
// back: to the idle ones, or removed.
func (g *runCgroup) end(log hclog.Logger) Usage {
	empty := waitEmptyBy(g.full, g.kill)
	if !empty {
		log.Error("processes of the run's cgroup did not die; leaving the cgroup", "cgroup", g.path, "waited", emptyWait)
	}
	g.mu.Lock()
	u := g.usage()
	if u.CPU != nil {
		total := *u.CPU
		*u.CPU -= g.used
		g.used = total
	}
	g.gen++
	g.mu.Unlock()
	g.release(empty && u.CPU != nil && !g.killed.Load())
	return u
}

// usage reads g's CPU time (all runs it held) and, where runs' cgroups
// have the memory controller (and so are never reused), its memory peak.
func (g *runCgroup) usage() Usage {
	u := Usage{CPU: g.totalCPU()}
	if slices.Contains(g.tree.ctl, "memory") {
		u.MemoryPeak = readPeak(g.path)
	}
	return u
}

// totalCPU reads g's cpu.stat, through its open descriptor where it has
// one: the CPU time of every run it held.
func (g *runCgroup) totalCPU() *time.Duration {
	if g.cpu < 0 {
		b, err := os.ReadFile(filepath.Join(g.path, "cpu.stat"))
		if err != nil {
			return nil
		}
		return cpuUsage(b)
	}
	var buf [512]byte
	n, err := unix.Pread(g.cpu, buf[:], 0)
	if err != nil {
		return nil
	}
	return cpuUsage(buf[:n])
}

// release gives g back after its run: kept for the next when it may be
// and reusable says it can, removed otherwise.
func (g *runCgroup) release(reusable bool) {
	t := g.tree
	if g.keep && reusable {
		t.mu.Lock()
		if !t.closed && len(t.idle) < maxIdle {
			t.idle = append(t.idle, g)
			t.mu.Unlock()
			return
		}
		t.mu.Unlock()
	}
	g.remove()
}

// readPeak reads memory.peak of the cgroup at path; nil without the
// memory controller.
func readPeak(path string) *int64 {
	b, err := os.ReadFile(filepath.Join(path, "memory.peak"))
	if err != nil {
		return nil
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return nil
	}
	return &n
}

// cpuUsage reads usage_usec from the text of a cpu.stat.
func cpuUsage(b []byte) *time.Duration {
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("usage_usec ")); ok {
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64); err == nil {
				d := time.Duration(n) * time.Microsecond
				return &d
			}
		}
	}
	return nil
}

// remove closes g's descriptors and removes it, retrying while the kernel
// still counts its last processes.
func (g *runCgroup) remove() {
	for _, fd := range []*int{&g.fd, &g.events, &g.cpu} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
	var err error
	for range 20 {
		if err = unix.Rmdir(g.path); err == nil || errors.Is(err, unix.ENOENT) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.tree.log.Warn("remove cgroup", "cgroup", g.path, "error", err)
}
