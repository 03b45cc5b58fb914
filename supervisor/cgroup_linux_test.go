package supervisor

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// cgroupTestRole runs the test binary as one of the helpers the cgroup
// tests start, when its environment asks for one.
func cgroupTestRole() (code int, ok bool) {
	if dir := os.Getenv(delegatedEnv); dir != "" {
		return runDelegatedDaemon(dir), true
	}
	if dir := os.Getenv(leftoverEnv); dir != "" {
		return runLeftoverDaemon(dir), true
	}
	if d, err := time.ParseDuration(os.Getenv(burnEnv)); err == nil {
		if f := os.Getenv(pidEnv); f != "" {
			if err := os.WriteFile(f+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil || os.Rename(f+".tmp", f) != nil {
				return 1, true
			}
			// Stay until the test has read this process's cgroup.
			time.Sleep(200 * time.Millisecond)
		}
		burnCPU(d)
		return 0, true
	}
	return 0, false
}

// pidEnv makes the burning test binary write its pid to that file first.
const pidEnv = "QD_SUPERVISOR_TEST_PID_FILE"

// needCgroups skips the test where this process cannot give runs cgroups
// (not root, no cgroup2), except under CI, where it must.
func needCgroups(t *testing.T) Containment {
	t.Helper()
	c := ProbeContainment()
	if c.Kind != ContainCgroup {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cgroups are needed under CI: %s", c.Reason)
		}
		t.Skipf("no cgroups here: %s", c.Reason)
	}
	return c
}

// escapeScript is an agent that starts a grandchild leaving its process
// group (setsid; with double set, through an intermediate process that
// exits, so the grandchild is reparented too), which writes its pid to
// pidFile, and then sleeps.
func escapeScript(t *testing.T, pidFile string, double bool) string {
	grand := MustScript(t, "echo $$ > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; exec sleep 300")
	start := "setsid " + grand + " </dev/null >/dev/null 2>&1 &"
	if double {
		start = "sh -c '" + start + "'"
	}
	return start + "\nsleep 300"
}

func TestCgroup_EscapedGrandchildDies(t *testing.T) {
	// Ensure a grandchild that left its run's process group (setsid, and
	// setsid after a double fork) dies with its run on a timeout, a cancel
	// and the supervisor's stop, that no cgroup of the supervisor holds a
	// process after the run, and that the stop removes them all.
	needCgroups(t)
	for _, how := range []string{"timeout", "cancel", "stop"} {
		for _, double := range []bool{false, true} {
			name := how + "/setsid"
			if double {
				name += "-double-fork"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				h := MustHarness(t, nil)
				c := h.s.Containment()
				if c.Kind != ContainCgroup {
					t.Fatalf("containment %s, want cgroup", c)
				}
				pidFile := filepath.Join(t.TempDir(), "grandchild")
				spec := Spec{KillGrace: time.Second}
				if how == "timeout" {
					spec.Timeout = 2 * time.Second
				}
				l := h.start(escapeScript(t, pidFile, double), "{}", spec)
				grand := MustReadPID(t, pidFile)
				if pgid, _ := syscall.Getpgid(grand); pgid == h.s.Snapshot()[0].PID {
					t.Fatalf("grandchild %d is still in the child's group", grand)
				}
				switch how {
				case "cancel":
					h.s.CancelTask(l.TaskID)
				case "stop":
					go h.s.Drain(5*time.Second, nil)
				}
				r := h.waitRun(l.RunID)
				MustDie(t, grand, "grandchild that called setsid, after "+how)
				want := map[string]lease.RunState{"timeout": lease.RunAbandoned, "cancel": lease.RunCancelled, "stop": lease.RunAbandoned}[how]
				if r.State != want {
					t.Errorf("run %s %q, want %s", r.State, r.Summary, want)
				}
				if r.CPUTime == nil {
					t.Error("run settled without its CPU time")
				}
				h.waitGone()
				slots, _ := filepath.Glob(filepath.Join(c.Path, "slot-*"))
				for _, g := range slots {
					if full, err := populated(g); err != nil || full {
						t.Errorf("cgroup %s after the run: populated %v (%v), want empty", g, full, err)
					}
				}
				if how == "stop" {
					if _, err := os.Stat(c.Path); !os.IsNotExist(err) {
						t.Errorf("the supervisor's cgroups %s still there after its stop (%v)", c.Path, err)
					}
				}
			})
		}
	}
}

func TestCgroup_CPUTime(t *testing.T) {
	// Ensure a CPU-burning child's CPU time is reported on its run, about
	// what it burnt.
	needCgroups(t)
	h := MustHarness(t, nil)
	const burn = 600 * time.Millisecond
	l := h.claim("{}", time.Minute)
	spec := Spec{Agent: "agent", Command: []string{os.Args[0]},
		Env: map[string]string{burnEnv: burn.String()}, Lease: time.Minute}
	if err := h.s.Start(l, spec); err != nil {
		t.Fatal(err)
	}
	r := h.waitRun(l.RunID)
	if r.State != lease.RunCompleted {
		t.Fatalf("burner run %s %q", r.State, r.Summary)
	}
	if r.CPUTime == nil {
		t.Fatal("no CPU time on the run")
	}
	t.Logf("burnt %s of CPU, cgroup reports %s", burn, *r.CPUTime)
	if *r.CPUTime < burn || *r.CPUTime > burn+time.Second {
		t.Errorf("CPU time %s, want at least %s and not much more", *r.CPUTime, burn)
	}
	if r.MemoryPeak != nil && !hasController(h.s.Containment(), "memory") {
		t.Errorf("memory peak %d reported without a memory controller", *r.MemoryPeak)
	}
}

func TestCgroup_SlotReusedWithCPUTimeOfItsOwn(t *testing.T) {
	// Ensure a run's cgroup, left empty, is given to the next run, and
	// that each run still reports only its own CPU time: a run burning
	// 400 ms, then one burning none in the same cgroup.
	needCgroups(t)
	h := MustHarness(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	var cgroups []string
	var cpu []time.Duration
	for i, burn := range []time.Duration{400 * time.Millisecond, 0} {
		l := h.claim("{}", time.Minute)
		spec := Spec{Agent: "agent", Command: []string{os.Args[0]}, Lease: time.Minute,
			Env: map[string]string{burnEnv: burn.String(), pidEnv: fmt.Sprintf("%s.%d", pidFile, i)}}
		if err := h.s.Start(l, spec); err != nil {
			t.Fatal(err)
		}
		pid := MustReadPID(t, fmt.Sprintf("%s.%d", pidFile, i))
		cgroups = append(cgroups, cgroupOf(t, pid))
		// While it lives, the status shows its CPU time so far: the
		// burner's grows past 100 ms; the idle run's is its own.
		live := liveCPU(t, h, l.RunID)
		if burn > 0 {
			for deadline := time.Now().Add(5 * time.Second); live < 100*time.Millisecond && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
				live = liveCPU(t, h, l.RunID)
			}
			if live < 100*time.Millisecond {
				t.Errorf("burning run's live CPU time %s in the status, want it past 100ms", live)
			}
		} else if live > 100*time.Millisecond {
			t.Errorf("idle run's live CPU time %s in the status: the slot's earlier run was counted too", live)
		}
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted || r.CPUTime == nil {
			t.Fatalf("run %d: %s %q, CPU time %v", i, r.State, r.Summary, r.CPUTime)
		}
		cpu = append(cpu, *r.CPUTime)
		h.waitGone()
	}
	t.Logf("cgroups %v, CPU %v", cgroups, cpu)
	if cgroups[0] != cgroups[1] {
		t.Errorf("second run in cgroup %s, want the first's %s again", cgroups[1], cgroups[0])
	}
	if cpu[0] < 400*time.Millisecond {
		t.Errorf("burning run reports %s of CPU, want at least 400ms", cpu[0])
	}
	if cpu[1] > 200*time.Millisecond {
		t.Errorf("idle run after it reports %s of CPU: the cgroup's earlier run was counted too", cpu[1])
	}
}

func TestCgroup_KilledSlotNotReused(t *testing.T) {
	// Ensure a run whose cgroup had to be killed (a setsid grandchild left
	// at a timeout) does not hand that cgroup to the next run: a cgroup
	// killed through cgroup.kill kills what is started in it later, and
	// the next run would die at once, killed by a signal no one sent.
	needCgroups(t)
	h := MustHarness(t, nil)
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	l := h.start(escapeScript(t, pidFile, false), "{}", Spec{Timeout: time.Second, KillGrace: 200 * time.Millisecond})
	grand := MustReadPID(t, pidFile)
	killed := cgroupOf(t, grand)
	if r := h.waitRun(l.RunID); r.State != lease.RunAbandoned {
		t.Fatalf("timed-out run %s %q, want abandoned", r.State, r.Summary)
	}
	MustDie(t, grand, "grandchild after the timeout")
	h.waitGone()
	for i := range 3 {
		out := filepath.Join(t.TempDir(), "cgroup")
		l := h.start("cat /proc/self/cgroup > "+out+"; exit 0", "{}", Spec{})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted {
			t.Fatalf("run %d after a killed cgroup: %s %q, want completed", i, r.State, r.Summary)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), killed+"\n") {
			t.Errorf("run %d started in the killed cgroup %s", i, killed)
		}
		h.waitGone()
	}
}

// liveCPU is the CPU time the status gives for a live run; the test
// fails if the run is not live or has none.
func liveCPU(t *testing.T, h *harness, run int64) time.Duration {
	t.Helper()
	for _, r := range h.s.Snapshot() {
		if r.RunID == run {
			if r.CPU == nil {
				t.Fatalf("run %d in the status without its CPU time", run)
			}
			return *r.CPU
		}
	}
	t.Fatalf("run %d not in the status", run)
	return 0
}

// burnEnv makes the test binary spin until it has used that much CPU.
const burnEnv = "QD_SUPERVISOR_TEST_BURN"

func burnCPU(d time.Duration) {
	for {
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		if time.Duration(ru.Utime.Nano()+ru.Stime.Nano()) >= d {
			return
		}
		for i := 0; i < 1_000_000; i++ {
		}
	}
}

func hasController(c Containment, name string) bool {
	for _, n := range c.Controllers {
		if n == name {
			return true
		}
	}
	return false
}

func TestCgroup_Limits(t *testing.T) {
	// Ensure memory_max is refused, with a message naming the agent and
	// the missing controller, where the v2 memory controller is not
	// enabled (as on a hybrid hierarchy), and applied where it is.
	needCgroups(t)
	h := MustHarness(t, nil)
	c := h.s.Containment()
	l := h.claim("{}", time.Minute)
	spec := Spec{Agent: "agent", Command: []string{MustScript(t, "cat /proc/self/cgroup; cat ../memory.max 2>/dev/null; exit 0")},
		Limits: Limits{MemoryMax: 64 << 20}, Lease: time.Minute}
	err := h.s.Start(l, spec)
	if hasController(c, "memory") {
		if err != nil {
			t.Fatalf("memory_max refused though the memory controller is there: %v", err)
		}
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted || r.MemoryPeak == nil {
			t.Fatalf("run with memory_max: %s %q, memory peak %v", r.State, r.Summary, r.MemoryPeak)
		}
		return
	}
	if err == nil {
		t.Fatal("memory_max accepted with no memory controller in cgroup v2")
	}
	t.Logf("refused: %v", err)
	for _, want := range []string{`agent "agent"`, "memory controller not enabled in cgroup v2 at", "memory_max needs it"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if r := h.waitRun(l.RunID); r.State != lease.RunFailed || !strings.Contains(r.Summary, "memory_max") {
		t.Errorf("refused run %s %q, want failed naming memory_max", r.State, r.Summary)
	}
	if err := c.Check("a", Limits{CPUMax: 0.5}); hasController(c, "cpu") != (err == nil) {
		t.Errorf("cpu_max with controllers %v: %v", c.Controllers, err)
	}
}

func TestCgroup_Fallback(t *testing.T) {
	// Ensure that with cgroups ruled out (QD_NO_CGROUP) runs still work as
	// process groups, the containment says so, nothing is measured, and
	// limits are refused saying why.
	t.Setenv(NoCgroupEnv, "1")
	h := MustHarness(t, nil)
	c := h.s.Containment()
	if c.Kind != ContainProcessGroup || !strings.Contains(c.Reason, NoCgroupEnv) {
		t.Fatalf("containment %+v, want process group because of %s", c, NoCgroupEnv)
	}
	if !strings.HasPrefix(c.String(), "process group (") {
		t.Errorf("containment shown as %q", c)
	}
	l := h.start("echo fine", "{}", Spec{})
	r := h.waitRun(l.RunID)
	if r.State != lease.RunCompleted || r.CPUTime != nil || r.MemoryPeak != nil {
		t.Errorf("run %s %q cpu %v memory %v, want completed with nothing measured", r.State, r.Summary, r.CPUTime, r.MemoryPeak)
	}
	err := c.Check("agent", Limits{CPUMax: 1})
	if err == nil || !strings.Contains(err.Error(), "cpu_max needs runs in cgroups") {
		t.Errorf("cpu_max without cgroups: %v", err)
	}
}

// leftoverEnv makes the test binary a daemon that starts one child with an
// escaping grandchild, then waits to be killed.
const leftoverEnv = "QD_SUPERVISOR_TEST_LEFTOVER"

func runLeftoverDaemon(dir string) int {
	mem := memlease.New()
	ctx := context.Background()
	if _, _, err := mem.Enqueue(ctx, lease.EnqueueParams{Agent: "agent"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := mem.Claim(ctx, lease.ClaimParams{Owner: "leftover", Lease: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := New(Config{Provider: mem, StateDir: dir, Owner: "leftover", Logger: hclog.NewNullLogger()})
	if err != nil || s.cg == nil {
		fmt.Fprintln(os.Stderr, "no cgroups:", err, s.cgReason)
		return 1
	}
	go s.Loop(ctx)
	pidFile := filepath.Join(dir, "grandchild")
	grand := filepath.Join(dir, "grand.sh")
	os.WriteFile(grand, []byte("#!/bin/sh\necho $$ > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; exec sleep 300\n"), 0o755)
	body := "setsid " + grand + " </dev/null >/dev/null 2>&1 & sleep 300"
	if err := s.Start(l, Spec{Agent: "agent", Command: []string{"/bin/sh", "-c", body}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

func TestCgroup_LeftoverOfCrashedDaemon(t *testing.T) {
	// Ensure a grandchild that called setsid and outlived its daemon (killed
	// with SIGKILL) is found by its cgroup and killed by the next daemon's
	// KillOrphans, and the dead daemon's cgroups are removed.
	c := needCgroups(t)
	dir := t.TempDir()
	daemon := exec.Command(os.Args[0])
	daemon.Env = append(os.Environ(), leftoverEnv+"="+dir)
	daemon.Stderr = os.Stderr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	grand := MustReadPID(t, filepath.Join(dir, "grandchild"))
	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	daemon.Wait()
	time.Sleep(300 * time.Millisecond)
	if !alive(grand) {
		t.Fatal("the setsid grandchild died with its daemon: nothing left to find")
	}
	left, _ := filepath.Glob(filepath.Join(c.Path, "qd-leftover", fmt.Sprintf("%d.*", daemon.Process.Pid)))
	if len(left) != 1 {
		t.Fatalf("dead daemon's cgroups: %v, want one directory", left)
	}
	s, err := New(Config{Provider: memlease.New(), StateDir: t.TempDir(), Owner: "leftover", Logger: MustLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Drain(0, nil)
	n, err := s.KillOrphans()
	if err != nil {
		t.Fatal(err)
	}
	MustDie(t, grand, "setsid grandchild of a crashed daemon")
	if n < 1 {
		t.Errorf("KillOrphans reported %d killed, want at least the leftover cgroup", n)
	}
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Errorf("dead daemon's cgroup %s still there (%v)", left[0], err)
	}
	// The live supervisor's own cgroups are never touched.
	if _, err := os.Stat(s.Containment().Path); err != nil {
		t.Errorf("KillOrphans removed its own supervisor's cgroup: %v", err)
	}
}

func TestCgroup_MovedInWhereClone3Refused(t *testing.T) {
	// Ensure that where children cannot be created in their cgroup (clone3
	// refused), each is moved into it as it starts, and its setsid
	// grandchild still dies with the run. The move comes just after the
	// exec: what the child starts in that moment stays outside (the agent
	// here waits a little before it forks, so the test sees the move).
	needCgroups(t)
	h := MustHarness(t, nil)
	h.s.cg.noClone.Store(true)
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	l := h.start("sleep 0.2\n"+escapeScript(t, pidFile, false), "{}", Spec{KillGrace: time.Second})
	grand := MustReadPID(t, pidFile)
	if got, want := cgroupOf(t, grand), cgroupOf(t, h.s.Snapshot()[0].PID); got != want || !strings.Contains(got, "/slot-") {
		t.Fatalf("grandchild in cgroup %s, want its run's (%s)", got, want)
	}
	h.s.CancelTask(l.TaskID)
	if r := h.waitRun(l.RunID); r.State != lease.RunCancelled {
		t.Errorf("run %s %q, want cancelled", r.State, r.Summary)
	}
	MustDie(t, grand, "setsid grandchild of a child moved into its cgroup")
}

// delegatedEnv makes the test binary a daemon started inside a cgroup
// marked delegated, as systemd starts a unit with Delegate=yes.
const delegatedEnv = "QD_SUPERVISOR_TEST_DELEGATED"

func runDelegatedDaemon(dir string) int {
	mem := memlease.New()
	ctx := context.Background()
	if _, _, err := mem.Enqueue(ctx, lease.EnqueueParams{Agent: "agent"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := mem.Claim(ctx, lease.ClaimParams{Owner: "deleg", Lease: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	terms := make(chan os.Signal, 1)
	signal.Notify(terms, syscall.SIGTERM)
	s, err := New(Config{Provider: mem, StateDir: dir, Owner: "deleg", Logger: hclog.NewNullLogger()})
	if err != nil || s.cg == nil {
		fmt.Fprintln(os.Stderr, "no cgroups:", err, s.cgReason)
		return 1
	}
	go s.Loop(ctx)
	os.WriteFile(filepath.Join(dir, "containment"), []byte(s.Containment().Path), 0o600)
	pidFile := filepath.Join(dir, "grandchild")
	grand := filepath.Join(dir, "grand.sh")
	os.WriteFile(grand, []byte("#!/bin/sh\necho $$ > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; exec sleep 300\n"), 0o755)
	if err := s.Start(l, Spec{Agent: "agent", Command: []string{"/bin/sh", "-c", "setsid " + grand + " </dev/null >/dev/null 2>&1 & sleep 300"}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	<-terms
	s.Drain(time.Second, nil)
	return 0
}

// cgroupOf is the cgroup2 path of pid.
func cgroupOf(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	t.Fatalf("pid %d has no cgroup2 cgroup: %q", pid, b)
	return ""
}

func TestCgroup_DelegatedParent(t *testing.T) {
	// Ensure a daemon started in a cgroup delegated to it (marked as
	// systemd marks a unit's with Delegate=yes) uses that cgroup: it moves
	// itself into a leaf of it, its runs' cgroups go beside, and a setsid
	// grandchild still dies with the daemon's stop.
	c := needCgroups(t)
	unit := filepath.Join(c.Mount, fmt.Sprintf("qdtest-unit-%d", os.Getpid()))
	if err := os.Mkdir(unit, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = killCgroup(unit)
		for _, d := range []string{"qd-daemon", "qd-deleg"} {
			_ = syscall.Rmdir(filepath.Join(unit, d))
		}
		if err := syscall.Rmdir(unit); err != nil {
			t.Errorf("remove test cgroup %s: %v", unit, err)
		}
	})
	if err := syscall.Setxattr(unit, "trusted.delegate", []byte("1"), 0); err != nil {
		t.Skipf("cannot mark a cgroup delegated here: %v", err)
	}
	fd, err := syscall.Open(unit, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	dir := t.TempDir()
	daemon := exec.Command(os.Args[0])
	daemon.Env = append(os.Environ(), delegatedEnv+"="+dir)
	daemon.Stderr = os.Stderr
	daemon.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: fd}
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	grand := MustReadPID(t, filepath.Join(dir, "grandchild"))
	rel := strings.TrimPrefix(unit, c.Mount)
	if got := cgroupOf(t, daemon.Process.Pid); got != rel+"/qd-daemon" {
		t.Errorf("daemon in cgroup %s, want the leaf %s/qd-daemon of its own", got, rel)
	}
	if got := cgroupOf(t, grand); !strings.HasPrefix(got, rel+"/qd-deleg/") || !strings.Contains(got, "/slot-") {
		t.Errorf("setsid grandchild in cgroup %s, want its run's under %s/qd-deleg", got, rel)
	}
	daemon.Process.Signal(syscall.SIGTERM)
	if err := daemon.Wait(); err != nil {
		t.Errorf("daemon: %v", err)
	}
	MustDie(t, grand, "setsid grandchild, after the delegated daemon's stop")
	if ents, _ := filepath.Glob(filepath.Join(unit, "qd-deleg", "*")); len(ents) > 0 {
		t.Errorf("cgroups left after the stop: %v", ents)
	}
}

func TestCgroup_MovedInWithWhatItStarted(t *testing.T) {
	// Ensure that where the child is moved into its cgroup after it
	// started (clone3 refused), what it started at once, still in its
	// process group, is moved in with it.
	needCgroups(t)
	h := MustHarness(t, nil)
	h.s.cg.noClone.Store(true)
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	grand := MustScript(t, "echo $$ > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; exec sleep 300")
	l := h.start(grand+" </dev/null >/dev/null 2>&1 &\nsleep 300", "{}", Spec{KillGrace: time.Second})
	pid := MustReadPID(t, pidFile)
	if got, want := cgroupOf(t, pid), cgroupOf(t, h.s.Snapshot()[0].PID); got != want || !strings.Contains(got, "/slot-") {
		t.Errorf("grandchild in cgroup %s, want its run's (%s)", got, want)
	}
	h.s.CancelTask(l.TaskID)
	h.waitRun(l.RunID)
	MustDie(t, pid, "grandchild")
}
