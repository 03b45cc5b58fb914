package supervisor

import (
	"context"
	"fmt"
	"time"

	"github.com/qd-run/qd/lease"
)

// maxSettleBatch bounds one Settle call.
const maxSettleBatch = 256

// settleReq is one settlement waiting for the settler.
type settleReq struct {
	st      lease.Settlement
	expires int64 // mono ns: retry no later than this, unless it completes the run
	late    bool  // said to be kept past its lease
	done    chan error
}

// settle hands st to the settler and waits for its answer. expires is when
// the lease would run out (mono ns); after that a failed call is not retried.
func (s *Supervisor) settle(st lease.Settlement, expires int64) error {
	req := &settleReq{st: st, expires: expires, done: make(chan error, 1)}
	select {
	case s.settleCh <- req:
	case <-s.stopSet:
		return fmt.Errorf("settle run %d: %w", st.RunID, errGaveUp)
	}
	return <-req.done
}

// settleLoop group-commits: each Settle call carries every settlement that
// queued up while the previous one was in flight.
func (s *Supervisor) settleLoop() {
	for {
		var batch []*settleReq
		select {
		case req := <-s.settleCh:
			batch = append(batch, req)
		case <-s.stopSet:
			return
		}
		s.settleBatch(s.gather(batch))
	}
}

// settleWindow bounds how long the settler waits for more settlements
// while other children are still running.
const settleWindow = 2 * time.Millisecond

// gather adds to batch every settlement already queued and, while other
// children of this supervisor are still running (their settlements may be
// a moment away), those that arrive within settleWindow: a busy supervisor
// settles several runs per transaction rather than one.
func (s *Supervisor) gather(batch []*settleReq) []*settleReq {
	var timeout <-chan time.Time
	for len(batch) < maxSettleBatch {
		select {
		case req := <-s.settleCh:
			batch = append(batch, req)
			continue
		default:
		}
		if timeout == nil {
			if s.unsettled() <= len(batch) {
				return batch
			}
			t := time.NewTimer(settleWindow)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case req := <-s.settleCh:
			batch = append(batch, req)
		case <-timeout:
			return batch
		case <-s.stopSet:
			return batch
		}
	}
	return batch
}

// unsettled counts the runs not yet settled and forgotten.
func (s *Supervisor) unsettled() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.children)
}

// answer hands req its answer, and counts a completion held past its
// lease as no longer held.
func (req *settleReq) answer(s *Supervisor, err error) {
	if req.late {
		s.lateHeld.Add(-1)
	}
	req.done <- err
}

// LateCompletions counts the completions held past their leases, waiting
// for the database to answer: while there are any, the daemon claims
// nothing, so that it never claims again a task whose completion it holds.
func (s *Supervisor) LateCompletions() int { return int(s.lateHeld.Load()) }

// settleBatch calls Settle until it answers, backing off between tries.
// A settlement whose lease would have expired is given up, but a
// completion, which is kept until the supervisor stops: the work is done,
// and the database takes it late when nothing else ran the task since.
func (s *Supervisor) settleBatch(batch []*settleReq) {
	backoff := 100 * time.Millisecond
	for {
		sts := make([]lease.Settlement, len(batch))
		for i, req := range batch {
			sts[i] = req.st
		}
		ctx, cancel := context.WithTimeout(s.stopCtx, 10*time.Second)
		errs, err := s.cfg.Provider.Settle(ctx, sts...)
		cancel()
		if err == nil {
			for i, req := range batch {
				var e error
				if i < len(errs) && errs[i] != nil {
					e = errs[i] // already names the run
				}
				req.answer(s, e)
			}
			return
		}
		s.log.Error("settle runs", "runs", len(batch), "error", err)
		now := s.mono()
		live := batch[:0]
		for _, req := range batch {
			switch {
			case now < req.expires:
				live = append(live, req)
			case req.st.Outcome == lease.RunCompleted:
				// Finished work is kept until the database answers: a
				// completion past its lease is taken late unless another
				// run of the task was claimed meanwhile.
				if !req.late {
					req.late = true
					s.lateHeld.Add(1)
					s.log.Warn("the run completed but the database is out of reach past its lease; its completion is kept and settled when it answers, unless another run of the task is claimed first",
						"run_id", req.st.RunID)
				}
				live = append(live, req)
			default:
				req.answer(s, fmt.Errorf("settle run %d: %w: %w", req.st.RunID, errGaveUp, err))
			}
		}
		if batch = live; len(batch) == 0 {
			return
		}
		select {
		case <-time.After(backoff):
		case <-s.stopSet:
			for _, req := range batch {
				req.answer(s, fmt.Errorf("settle run %d: %w: %w", req.st.RunID, errGaveUp, err))
			}
			return
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}
