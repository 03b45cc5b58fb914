package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// forkExec runs prog n times, parallel at a time, each with payload on
// stdin, its output drained through pipes and in a process group of its
// own (what the supervisor does for each child, and nothing else). Its
// rate is taken, like the daemon's, over the middle 80% of the finish
// times; the machine's CPU over the whole span.
func forkExec(ctx context.Context, prog string, payload []byte, parallel, n int) (peerResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next  atomic.Int64
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	ends := make([]time.Time, n)
	sampler := sampleMachine()
	start := time.Now()
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if err := loopCmd(prog, payload).Run(); err != nil {
					mu.Lock()
					if first == nil && ctx.Err() == nil {
						first = fmt.Errorf("run %s: %w", prog, err)
					}
					mu.Unlock()
					cancel()
					return
				}
				ends[i] = time.Now()
			}
		}()
	}
	wg.Wait()
	res := peerResult{Tasks: n, Wall: time.Since(start)}
	serr := sampler.stop()
	if err := firstErr(&mu, &first, ctx.Err()); err != nil {
		return res, err
	}
	if serr != nil {
		return res, serr
	}
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	var err error
	if res.steady, err = steadySpan(ends); err != nil {
		return res, fmt.Errorf("fork-exec loop: %w", err)
	}
	if res.machine, err = sampler.between(res.From, res.To); err != nil {
		return res, fmt.Errorf("fork-exec loop: %w", err)
	}
	return res, nil
}

// loopCmd is one child of the plain loop: payload on stdin, its output
// drained through pipes, in a process group of its own.
func loopCmd(prog string, payload []byte) *exec.Cmd {
	cmd := exec.Command(prog)
	cmd.Stdin = bytes.NewReader(payload)
	cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// steady is the middle 80% of a runner's finish times: its rate and its
// span, so that neither the start nor the last stragglers count.
type steady struct {
	Rate     float64 // tasks/s
	From, To time.Time
	Tasks    int // finished within the span
}

// steadySpan takes the middle 80% of sorted finish times.
func steadySpan(ends []time.Time) (steady, error) {
	lo, hi := len(ends)/10, len(ends)-1-len(ends)/10
	if hi <= lo || !ends[hi].After(ends[lo]) {
		return steady{}, fmt.Errorf("%d finish times span no time", len(ends))
	}
	return steady{Rate: float64(hi-lo) / ends[hi].Sub(ends[lo]).Seconds(), From: ends[lo], To: ends[hi], Tasks: hi - lo}, nil
}

func firstErr(mu *sync.Mutex, first *error, otherwise error) error {
	mu.Lock()
	defer mu.Unlock()
	if *first != nil {
		return *first
	}
	return otherwise
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

// forkExecAtTicks is the plain loop's tick to exec: at each of ticks
// whole-second ticks it starts parallel children of prog at once, each
// from a goroutine of its own that was waiting for the tick (loopCmd, as
// in forkExec), and takes the time from the tick to the return
// of each start (after fork and exec). It is the floor of qd's tick to
// exec on this machine: the same children, started as fast as a Go
// program can start them, with no claim before. The times come sorted.
func forkExecAtTicks(ctx context.Context, prog string, payload []byte, parallel, ticks int) ([]time.Duration, error) {
	var out []time.Duration
	for range ticks {
		tick := time.Now().Truncate(time.Second).Add(time.Second)
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			first error
		)
		took := make([]time.Duration, parallel)
		at := make(chan struct{})
		for i := range parallel {
			wg.Go(func() {
				<-at
				if ctx.Err() != nil {
					return
				}
				cmd := loopCmd(prog, payload)
				err := cmd.Start()
				took[i] = time.Since(tick)
				if err == nil {
					err = cmd.Wait()
				}
				if err != nil {
					mu.Lock()
					if first == nil {
						first = fmt.Errorf("run %s: %w", prog, err)
					}
					mu.Unlock()
				}
			})
		}
		err := sleepCtx(ctx, time.Until(tick))
		close(at)
		wg.Wait()
		if err := firstErr(&mu, &first, err); err != nil {
			return nil, err
		}
		out = append(out, took...)
	}
	slices.Sort(out)
	return out, nil
}
