package leasetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

// Ensure a paused agent's tasks are claimed by no one, by name or as any
// agent, in any lane, while other agents' tasks go on; that a run already
// live is not touched; and that a resume lets them be claimed again.
func testAgentsPause(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	mustEnqueue(t, p, task("ap1", "a"))
	running := MustClaim(t, p, claimIn("ap1"))
	mustEnqueue(t, p, task("ap1", "a"))
	mustEnqueue(t, p, task("ap2", "a"))
	other := mustEnqueue(t, p, task("ap2", "b"))

	pa, err := p.PauseAgent(ctx, "a", "qd agent pause")
	if err != nil || pa.Agent != "a" || pa.At.IsZero() || pa.SetBy != "qd agent pause" {
		t.Fatalf("pause agent a: %+v, %v", pa, err)
	}
	again, err := p.PauseAgent(ctx, "a", "qd ui")
	if err != nil || !again.At.Equal(pa.At) || again.SetBy != "qd agent pause" {
		t.Errorf("pausing a paused agent: %+v, %v; want the first pause kept, %+v", again, err, pa)
	}
	byName := claimIn()
	byName.Agent = "a"
	mustNoWork(t, p, byName)
	ob := MustClaim(t, p, claimIn())
	if ob.TaskID != other {
		t.Errorf("any agent with a paused: claimed task %d of agent %s, want %d of b", ob.TaskID, ob.Agent, other)
	}
	mustSettle(t, p, complete(ob.RunID))
	mustNoWork(t, p, claimIn())
	mustNoWork(t, p, claimIn("ap1", "ap2"))
	if res := beat(t, p, lease.Beat{RunID: running.RunID, Lease: longLease}); res.Err != nil {
		t.Errorf("heartbeat of a paused agent's live run: %v", res.Err)
	}
	mustSettle(t, p, complete(running.RunID))
	paused, err := p.PausedAgents(ctx)
	if err != nil || len(paused) != 1 || paused[0].Agent != "a" {
		t.Errorf("paused agents: %+v, %v; want a", paused, err)
	}

	if err := p.ResumeAgent(ctx, "a"); err != nil {
		t.Fatalf("resume agent a: %v", err)
	}
	if err := p.ResumeAgent(ctx, "a"); err != nil {
		t.Errorf("resuming an agent not paused: %v", err)
	}
	MustClaim(t, p, byName)
	MustClaim(t, p, byName)
	mustNoWork(t, p, byName)
	if paused, err := p.PausedAgents(ctx); err != nil || len(paused) != 0 {
		t.Errorf("paused agents after resume: %+v, %v", paused, err)
	}
	for _, bad := range []string{"", "A B", "-x"} {
		if _, err := p.PauseAgent(ctx, bad, ""); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("pause agent %q: %v, want ErrInvalid", bad, err)
		}
	}
}

// Ensure that once PauseAgent has returned, no claim that starts after it
// takes a task of the agent, while many claimers race for the lane.
func testAgentsPauseUnderRace(t *testing.T, p lease.Provider) {
	ctx := context.Background()
	set := 4
	if _, err := p.SetLane(ctx, lease.LaneUpdate{Name: "apr", MaxRunning: &set}); err != nil {
		t.Fatal(err)
	}
	for i := range 120 {
		mustEnqueue(t, p, task("apr", []string{"a", "b"}[i%2]))
	}
	var pausedAt atomic.Int64 // unix ns once PauseAgent returned
	var mu sync.Mutex
	var bad []int64
	var claimed atomic.Int64
	stop := make(chan struct{})
	go func() {
		time.Sleep(100 * time.Millisecond)
		if _, err := p.PauseAgent(ctx, "a", "leasetest"); err != nil {
			t.Errorf("pause agent a: %v", err)
		}
		pausedAt.Store(time.Now().UnixNano())
		time.Sleep(300 * time.Millisecond)
		close(stop)
	}()
	race(12, func(g int) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			cp := claimIn()
			if g%3 == 0 {
				cp.Agent = "a"
			}
			after := pausedAt.Load()
			l, err := p.Claim(ctx, cp)
			if errors.Is(err, lease.ErrNoWork) {
				pause(time.Millisecond)
				continue
			}
			if err != nil {
				t.Errorf("claim: %v", err)
				return
			}
			claimed.Add(1)
			if after != 0 && l.Agent == "a" {
				mu.Lock()
				bad = append(bad, l.TaskID)
				mu.Unlock()
			}
			mustSettle(t, p, complete(l.RunID))
		}
	})
	if claimed.Load() == 0 {
		t.Fatal("no claim succeeded")
	}
	if len(bad) > 0 {
		t.Errorf("claims begun after the pause returned took tasks of the paused agent: %v", bad)
	}
	t.Logf("%d claims, none of the paused agent after its pause", claimed.Load())
	checkConsistent(t, p)
}
