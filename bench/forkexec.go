package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// forkResult is what the plain fork-exec loop measured.
type forkResult struct {
	Tasks   int
	Elapsed time.Duration
	CPU     time.Duration // this process's and its children's, over Elapsed
}

func (r forkResult) perSecond() float64 { return perSecond(r.Tasks, r.Elapsed) }

// forkExec runs prog parallel at a time, each with payload on stdin, its
// output drained through pipes and in a process group of its own (what the
// supervisor does for each child, and nothing else), for warmup and then
// measure. It counts the children that ended within the measured span.
func forkExec(ctx context.Context, prog string, payload []byte, parallel int, warmup, measure time.Duration) (forkResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		timing atomic.Bool
		done   atomic.Int64
		wg     sync.WaitGroup
		mu     sync.Mutex
		first  error
	)
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				cmd := exec.Command(prog)
				cmd.Stdin = bytes.NewReader(payload)
				cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
				cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
				if err := cmd.Run(); err != nil {
					mu.Lock()
					if first == nil && ctx.Err() == nil {
						first = fmt.Errorf("run %s: %w", prog, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				if timing.Load() {
					done.Add(1)
				}
			}
		}()
	}
	defer wg.Wait()
	if err := sleepCtx(ctx, warmup); err != nil {
		return forkResult{}, firstErr(&mu, &first, err)
	}
	cpu0 := ownCPU()
	start := time.Now()
	timing.Store(true)
	if err := sleepCtx(ctx, measure); err != nil {
		return forkResult{}, firstErr(&mu, &first, err)
	}
	timing.Store(false)
	res := forkResult{Tasks: int(done.Load()), Elapsed: time.Since(start), CPU: ownCPU() - cpu0}
	cancel()
	wg.Wait()
	if err := firstErr(&mu, &first, nil); err != nil {
		return res, err
	}
	return res, nil
}

func firstErr(mu *sync.Mutex, first *error, otherwise error) error {
	mu.Lock()
	defer mu.Unlock()
	if *first != nil {
		return *first
	}
	return otherwise
}

// ownCPU is the CPU this process and its reaped children have used.
func ownCPU() time.Duration {
	var self, kids syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	tv := func(t syscall.Timeval) time.Duration { return time.Duration(t.Nano()) }
	return tv(self.Utime) + tv(self.Stime) + tv(kids.Utime) + tv(kids.Stime)
}

// sleepCtx waits d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
