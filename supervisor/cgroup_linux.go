package supervisor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
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

// limitCtls are the controllers qd enables for runs, where it may.
var limitCtls = []string{"cpu", "memory"}

// daemonLeaf is where a daemon moves itself when its own cgroup is the
// parent: a cgroup with processes cannot hand controllers to children.
const daemonLeaf = "qd-daemon"

// cgPlan is where this process would put its runs' cgroups.
type cgPlan struct {
	mount     string // the cgroup2 mount point
	own       string // this process's cgroup, as /proc/self/cgroup says
	base      string // directory of the parent P
	delegated bool   // base is the daemon's own cgroup
	avail     []string
}

// probeCgroup finds where runs' cgroups can go, reading only; the error
// says why they cannot.
func probeCgroup() (cgPlan, error) {
	var p cgPlan
	if os.Getenv(NoCgroupEnv) != "" {
		return p, fmt.Errorf("%s is set", NoCgroupEnv)
	}
	var err error
	if p.mount, err = cgroup2Mount(); err != nil {
		return p, err
	}
	if p.own, err = ownCgroup(); err != nil {
		return p, err
	}
	// A daemon that moved itself out of its own cgroup (leaveBase) still
	// uses that one.
	p.own = strings.TrimSuffix(p.own, "/"+daemonLeaf)
	if p.own != "/" {
		dir := filepath.Join(p.mount, p.own)
		if delegated(dir) {
			p.base, p.delegated = dir, true
		}
	}
	if p.base == "" {
		if os.Geteuid() != 0 {
			if p.own == "/" {
				return p, errUndelegated{fmt.Errorf("qd is not root and its cgroup is the root of the cgroup2 file system at %s", p.mount)}
			}
			return p, errUndelegated{fmt.Errorf("cgroup %s is not delegated to qd (under systemd, set Delegate=yes in the unit) and qd is not root", p.own)}
		}
		p.base = filepath.Join(p.mount, "qd")
	}
	probe := p.base
	if _, err := os.Stat(probe); err != nil {
		probe = filepath.Dir(probe)
	}
	if err := unix.Access(probe, unix.W_OK); err != nil {
		return p, fmt.Errorf("cannot create cgroups in %s: %w", probe, err)
	}
	// What the parent may hand to its children: its own controllers when
	// qd may enable them there, else what the root enabled for it.
	from := filepath.Join(p.base, "cgroup.controllers")
	if _, err := os.Stat(p.base); err != nil {
		from = filepath.Join(p.mount, "cgroup.subtree_control")
	}
	have := readWords(from)
	for _, c := range limitCtls {
		if slices.Contains(have, c) {
			p.avail = append(p.avail, c)
		}
	}
	return p, nil
}

// errUndelegated: not root, and no cgroup delegated to this process.
type errUndelegated struct{ error }

// ProbeContainment says how a daemon started now by this process's user,
// where this process runs, would contain its runs, without creating
// anything: for checks of a config before a daemon starts.
func ProbeContainment() Containment {
	p, err := probeCgroup()
	if err != nil {
		var u errUndelegated
		return Containment{Kind: ContainProcessGroup, Reason: err.Error(), Undecided: errors.As(err, &u)}
	}
	return Containment{Kind: ContainCgroup, Path: p.base, Mount: p.mount, Controllers: p.avail, Reason: missingReason(p.avail, p.mount)}
}

func missingReason(have []string, mount string) string {
	var miss []string
	for _, c := range limitCtls {
		if !slices.Contains(have, c) {
			miss = append(miss, c)
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return fmt.Sprintf("%s controller not enabled in cgroup v2 at %s", strings.Join(miss, " and "), mount)
}

// cgroup2Mount finds where the cgroup2 file system is mounted: at
// /sys/fs/cgroup on a unified hierarchy, at /sys/fs/cgroup/unified on a
// hybrid one.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("find the cgroup2 mount: %w", err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, pf := strings.Fields(post), strings.Fields(pre)
		if ok && len(fs) > 0 && fs[0] == "cgroup2" && len(pf) >= 5 && pf[3] == "/" {
			found = append(found, unescapeMount(pf[4]))
		}
	}
	for _, want := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if slices.Contains(found, want) {
			return want, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return "", errors.New("no cgroup2 file system is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup is this process's cgroup in the cgroup2 hierarchy.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read own cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return path, nil
		}
	}
	return "", errors.New("this process has no cgroup2 cgroup (/proc/self/cgroup has no 0:: line)")
}

// delegated reports whether the cgroup at dir is handed to this process to
// manage: systemd marks a unit's cgroup so with Delegate=yes (an extended
// attribute), and gives a unit's user write access to it.
func delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	if os.Geteuid() == 0 {
		return false // root may write anywhere: that proves nothing
	}
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if unix.Access(p, unix.W_OK) != nil {
			return false
		}
	}
	return true
}

func readWords(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

func writeFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

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
	again.Stdin, again.Stdout, again.Stderr = cmd.Stdin, cmd.Stdout, cmd.Stderr
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
