package supervisor

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// The layout of qd's cgroups, under a parent P (the daemon's own cgroup
// when it is delegated to it, else P is "qd" under the cgroup2 root;
// NAME is the daemon's name, Config.Owner):
//
//	P/qd-daemon                  the daemon itself, when P is its own cgroup
//	P/qd-NAME/PID.START.N         one supervisor: its daemon's pid and start
//	P/qd-NAME/PID.START.N/slot-K  the cgroup of one run at a time
//
// A supervisor's directory names the process that made it, so that a
// later daemon of the same name tells the cgroups of a live daemon (its
// own included) from those a dead one left: KillOrphans kills and removes
// the latter.
//
// Making and removing a cgroup costs the kernel more than starting a
// small child does, so a slot that its run left empty is kept and given
// to a later run (cgroup v2 cannot rename a cgroup, hence the names of
// slots, not runs). A slot is made afresh, and removed after its run, for
// a run with limits, and wherever the memory controller is on: memory.max
// would have to be undone, and the memory peak of a kept slot would be its
// earlier runs' too.

// cgroupTree is a supervisor's directory of run cgroups.
type cgroupTree struct {
	plan    cgPlan
	dir     string   // P/qd-NAME/PID.START.N
	ctl     []string // controllers each run's cgroup has
	reason  string   // why some are missing
	noClone atomic.Bool
	log     hclog.Logger

	mu     sync.Mutex
	idle   []*runCgroup // empty slots kept for the next runs
	slots  int          // slots made, for the next slot's name
	closed bool
}

// maxIdle bounds the empty slots a supervisor keeps.
const maxIdle = 128

var treeSeq atomic.Int64

// setupCgroups creates this supervisor's directory of run cgroups, or
// says why there can be none.
func setupCgroups(owner string, log hclog.Logger) (*cgroupTree, error) {
	p, err := probeCgroup()
	if err != nil {
		return nil, err
	}
	t := &cgroupTree{plan: p, log: log}
	if p.delegated {
		t.leaveBase()
	}
	_, start := Identity()
	group := filepath.Join(p.base, "qd-"+safeName(owner))
	t.dir = filepath.Join(group, fmt.Sprintf("%d.%d.%d", os.Getpid(), start, treeSeq.Add(1)))
	// Another daemon may remove group, empty, in between: try again then.
	for try := 0; ; try++ {
		err := os.MkdirAll(t.dir, 0o755)
		if err == nil {
			break
		}
		if try == 2 || !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("create cgroup %s: %w", t.dir, err)
		}
	}
	t.sweepEmpty()
	// Hand the controllers down to the runs, where they are there to hand.
	for _, d := range []string{p.base, group, t.dir} {
		have := readWords(filepath.Join(d, "cgroup.controllers"))
		on := readWords(filepath.Join(d, "cgroup.subtree_control"))
		for _, c := range limitCtls {
			if slices.Contains(have, c) && !slices.Contains(on, c) {
				if err := writeFile(filepath.Join(d, "cgroup.subtree_control"), "+"+c); err != nil {
					log.Debug("enable cgroup controller", "cgroup", d, "controller", c, "error", err)
				}
			}
		}
	}
	on := readWords(filepath.Join(t.dir, "cgroup.subtree_control"))
	for _, c := range limitCtls {
		if slices.Contains(on, c) {
			t.ctl = append(t.ctl, c)
		}
	}
	t.reason = missingReason(t.ctl, p.mount)
	return t, nil
}

// leaveBase moves the daemon out of its own cgroup into a leaf under it,
// so that the cgroup may hand controllers to the runs' cgroups.
func (t *cgroupTree) leaveBase() {
	leaf := filepath.Join(t.plan.base, daemonLeaf)
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		t.log.Warn("cannot move qd out of its cgroup; runs get no controllers", "cgroup", leaf, "error", err)
		return
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		t.log.Warn("cannot move qd out of its cgroup; runs get no controllers", "cgroup", leaf, "error", err)
	}
}

func (t *cgroupTree) containment() Containment {
	return Containment{Kind: ContainCgroup, Path: t.dir, Mount: t.plan.mount, Controllers: slices.Clone(t.ctl), Reason: t.reason}
}

// safeName keeps a daemon's name to what a cgroup's name may hold.
func safeName(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '/' || r == 0 || r == '\n' {
			return '_'
		}
		return r
	}, s)
	if s == "" || s == "." || s == ".." {
		return "_"
	}
	return s
}

// close removes the supervisor's directory with its idle slots, and the
// daemon's when no other supervisor of the same name uses it; cgroups
// still populated stay.
func (t *cgroupTree) close() {
	t.mu.Lock()
	idle := t.idle
	t.idle, t.closed = nil, true
	t.mu.Unlock()
	for _, g := range idle {
		g.remove()
	}
	if err := unix.Rmdir(t.dir); err != nil && !errors.Is(err, unix.ENOENT) {
		t.log.Warn("remove cgroup", "cgroup", t.dir, "error", err)
	}
	_ = unix.Rmdir(filepath.Dir(t.dir))
}

func (t *cgroupTree) idleSlots() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.idle)
}

// cgroupOf is the cgroup (its directory) that process pid is in, "" when
// runs have no cgroups or it cannot be read.
func (t *cgroupTree) cgroupOf(pid int) string {
	if t == nil {
		return ""
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			return filepath.Join(t.plan.mount, rel)
		}
	}
	return ""
}

// newRun gives the run of agent a slot, with lim applied: an idle one
// when lim is empty and slots are kept, else a new one.
func (t *cgroupTree) newRun(agent string, lim Limits) (*runCgroup, error) {
	if lim != (Limits{}) {
		if err := t.containment().Check(agent, lim); err != nil {
			return nil, err
		}
	}
	keep := lim == (Limits{}) && !slices.Contains(t.ctl, "memory")
	t.mu.Lock()
	if n := len(t.idle); keep && n > 0 {
		g := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		return g, nil
	}
	t.slots++
	path := filepath.Join(t.dir, "slot-"+strconv.Itoa(t.slots))
	t.mu.Unlock()
	if err := os.Mkdir(path, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("create cgroup %s: %w", path, err)
	}
	g := &runCgroup{path: path, fd: -1, events: -1, cpu: -1, keep: keep, tree: t}
	var err error
	if lim.MemoryMax > 0 {
		err = writeFile(filepath.Join(path, "memory.max"), strconv.FormatInt(lim.MemoryMax, 10))
	}
	if lim.CPUMax > 0 && err == nil {
		const period = 100000
		quota := max(1000, int64(math.Round(lim.CPUMax*period)))
		err = writeFile(filepath.Join(path, "cpu.max"), fmt.Sprintf("%d %d", quota, period))
	}
	if err == nil {
		g.fd, err = unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	}
	if err != nil {
		g.remove()
		return nil, fmt.Errorf("set up cgroup %s: %w", path, err)
	}
	// Without these the slot still works, by path, and is not kept.
	if g.events, err = unix.Openat(g.fd, "cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		g.events, g.keep = -1, false
	}
	if g.cpu, err = unix.Openat(g.fd, "cpu.stat", unix.O_RDONLY|unix.O_CLOEXEC, 0); err != nil {
		g.cpu, g.keep = -1, false
	}
	return g, nil
}

// killLeftovers kills and removes the run cgroups that supervisors of dead
// daemons of this name left under the parent: their processes have no one
// to supervise them. Other names' are left to their own daemons. It
// returns how many still held processes.
func (t *cgroupTree) killLeftovers() int {
	killed := 0
	for _, dir := range t.deadDirs() {
		for _, r := range subdirs(dir) {
			if full, _ := populated(r); full {
				_ = killCgroup(r)
				if waitEmpty(r) {
					t.log.Warn("killed leftover processes in the cgroup of an earlier incarnation's run", "cgroup", r)
				} else {
					t.log.Error("leftover processes in the cgroup of an earlier incarnation's run did not die", "cgroup", r)
				}
				killed++
			}
			if err := unix.Rmdir(r); err != nil && !errors.Is(err, unix.ENOENT) {
				t.log.Warn("remove leftover cgroup", "cgroup", r, "error", err)
			}
		}
		_ = unix.Rmdir(dir)
	}
	return killed
}

// sweepEmpty removes the cgroups of dead daemons of this name that hold no
// process (a cgroup with one cannot be removed): those of a daemon that
// exited without removing them. KillOrphans deals with the others.
func (t *cgroupTree) sweepEmpty() {
	for _, dir := range t.deadDirs() {
		for _, r := range subdirs(dir) {
			_ = unix.Rmdir(r)
		}
		_ = unix.Rmdir(dir)
	}
}

// subdirs lists the cgroups under dir: its slots.
func subdirs(dir string) []string {
	ents, _ := os.ReadDir(dir)
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out
}

// deadDirs lists the supervisor directories beside this one whose daemon
// is gone.
func (t *cgroupTree) deadDirs() []string {
	group := filepath.Dir(t.dir)
	ents, _ := os.ReadDir(group)
	var out []string
	for _, e := range ents {
		if e.IsDir() && deadMaker(e.Name()) {
			out = append(out, filepath.Join(group, e.Name()))
		}
	}
	return out
}

// deadMaker reports whether name is a supervisor's directory (PID.START.N)
// whose process is gone.
func deadMaker(name string) bool {
	f := strings.Split(name, ".")
	if len(f) != 3 {
		return false
	}
	pid, err1 := strconv.Atoi(f[0])
	start, err2 := strconv.ParseUint(f[1], 10, 64)
	if err1 != nil || err2 != nil || pid <= 0 {
		return false
	}
	now, ok := procStart(pid)
	return !ok || now != start
}
