package supervisor

import (
	"context"
	"fmt"
	"github.com/qd-run/qd/internal/box"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// TestMain lets the test binary act as a small daemon for
// TestSupervisor_ParentDeath.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == box.Arg {
		box.Main(os.Args[2:]) // the shim of a boxed child
	}
	if dir := os.Getenv("QD_SUPERVISOR_TEST_DAEMON"); dir != "" {
		os.Exit(runTestDaemon(dir))
	}
	if code, ok := cgroupTestRole(); ok {
		os.Exit(code)
	}
	os.Exit(m.Run())
}

// runTestDaemon starts one child that writes its pid to dir/child, then
// waits to be killed.
func runTestDaemon(dir string) int {
	mem := memlease.New()
	ctx := context.Background()
	if _, _, err := mem.Enqueue(ctx, lease.EnqueueParams{Agent: "agent"}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	l, err := mem.Claim(ctx, lease.ClaimParams{Owner: "daemon", Lease: time.Minute})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s, err := New(Config{Provider: mem, StateDir: dir, Logger: hclog.NewNullLogger()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go s.Loop(ctx)
	body := "echo $$ > " + filepath.Join(dir, "child.tmp") + "; mv " + filepath.Join(dir, "child.tmp") + " " + filepath.Join(dir, "child") + "; exec sleep 300"
	if err := s.Start(l, Spec{Agent: "agent", Command: []string{"/bin/sh", "-c", body}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	select {}
}

func TestSupervisor_ParentDeath(t *testing.T) {
	// Ensure a child dies with its daemon when the daemon is SIGKILLed, and
	// that the daemon's next incarnation finds its record.
	if runtime.GOOS != "linux" {
		t.Skip("parent-death signal is Linux only")
	}
	dir := t.TempDir()
	daemon := exec.Command(os.Args[0])
	daemon.Env = append(os.Environ(), "QD_SUPERVISOR_TEST_DAEMON="+dir)
	daemon.Stderr = os.Stderr
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	child := MustReadPID(t, filepath.Join(dir, "child"))
	// The record is written once the fork returns, which may be after the
	// child wrote its pid: kill the daemon only once it holds the record.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if ents, _ := os.ReadDir(childrenDir(dir)); len(ents) > 0 {
			if info, err := ents[0].Info(); err == nil && info.Size() > 0 {
				break
			}
		}
	}
	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	daemon.Wait()
	MustDie(t, child, "child of a killed daemon")
	if ents, _ := os.ReadDir(childrenDir(dir)); len(ents) != 1 {
		t.Fatalf("%d child records after the crash, want 1 for the next incarnation", len(ents))
	}
}

func TestSupervisor_ThreadChurn(t *testing.T) {
	// Ensure a child survives when the OS thread that called Start exits
	// (a parent-death signal fires on the creating thread's exit).
	t.Parallel()
	h := MustHarness(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	l := h.claim("{}", time.Minute)
	spec := Spec{Agent: "agent", Command: []string{MustScript(t, "echo $$ > "+pidFile+"; sleep 300")}}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		errc <- h.s.Start(l, spec)
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	pid := MustReadPID(t, pidFile)
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			runtime.LockOSThread()
		}()
	}
	wg.Wait()
	time.Sleep(500 * time.Millisecond)
	if !alive(pid) {
		r, _ := h.mem.Run(context.Background(), l.RunID)
		t.Fatalf("child died when the thread that started it exited: run %s %q", r.State, r.Summary)
	}
}
