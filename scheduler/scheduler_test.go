package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/robfig/cron/v3"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
	"github.com/qd-run/qd/scheduler"
)

// Runner is a fake scheduler.Runner made of func fields.
type Runner struct {
	mu      sync.Mutex
	running map[string]int
	started []*lease.Lease
	OnStart func(agent string, l *lease.Lease)
}

func (r *Runner) Running(agent string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running[agent]
}

func (r *Runner) Start(agent string, l *lease.Lease, _ time.Time) error {
	r.mu.Lock()
	if r.running == nil {
		r.running = map[string]int{}
	}
	r.running[agent]++
	r.started = append(r.started, l)
	r.mu.Unlock()
	if r.OnStart != nil {
		r.OnStart(agent, l)
	}
	return nil
}

func (r *Runner) finish(agent string) {
	r.mu.Lock()
	r.running[agent]--
	r.mu.Unlock()
}

func (r *Runner) Started() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started)
}

func MustSchedule(tb testing.TB, spec string) cron.Schedule {
	tb.Helper()
	s, err := cron.ParseStandard(spec)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func MustEnqueue(tb testing.TB, q lease.Provider, lane, agent string) int64 {
	tb.Helper()
	id, _, err := q.Enqueue(context.Background(), lease.EnqueueParams{Lane: lane, Agent: agent})
	if err != nil {
		tb.Fatal(err)
	}
	return id
}

func start(tb testing.TB, s *scheduler.Scheduler) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = s.Run(ctx)
		close(done)
	}()
	tb.Cleanup(func() {
		cancel()
		<-done
	})
}

func waitFor(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Ensure a tick claims up to the agent's parallelism across lanes, and a
// tick that finds the agent full claims nothing.
func TestScheduler_TickFillsParallel(t *testing.T) {
	q := memlease.New()
	for i := range 5 {
		MustEnqueue(t, q, fmt.Sprintf("lane%d", i), "build")
	}
	MustEnqueue(t, q, "lane9", "other")
	r := &Runner{}
	s := scheduler.New(scheduler.Config{Queue: q, Runner: r, Logger: hclog.NewNullLogger(), Owner: "test"})
	s.Set([]scheduler.Agent{{Name: "build", Schedule: MustSchedule(t, "@every 1s"), Parallel: 3, Lease: time.Minute}}, nil)
	start(t, s)
	waitFor(t, 3*time.Second, "first tick", func() bool { return r.Started() > 0 })
	time.Sleep(2500 * time.Millisecond) // two more ticks while full
	if got := r.Started(); got != 3 {
		t.Fatalf("started %d runs, want 3 (parallel 3, agent full afterwards)", got)
	}
	for _, l := range r.started {
		if l.Agent != "build" {
			t.Errorf("claimed a task of agent %q", l.Agent)
		}
	}
}

// Ensure that when a claim fills every free slot, a finished run makes the
// scheduler claim again at once instead of waiting for the next tick.
func TestScheduler_KickDrainsBacklog(t *testing.T) {
	q := memlease.New()
	for range 20 {
		MustEnqueue(t, q, "a", "fast")
	}
	var s *scheduler.Scheduler
	r := &Runner{}
	r.OnStart = func(agent string, l *lease.Lease) {
		go func() {
			_, _ = q.Settle(context.Background(), lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted})
			r.finish(agent)
			s.Kick(agent)
		}()
	}
	s = scheduler.New(scheduler.Config{Queue: q, Runner: r, Owner: "test"})
	// One tick, then none for a day: only kicks can drain twenty tasks.
	s.Set([]scheduler.Agent{{Name: "fast", Schedule: onceAt{time.Now().Add(200 * time.Millisecond)}, Parallel: 1, Lease: time.Minute}}, nil)
	start(t, s)
	waitFor(t, 10*time.Second, "twenty runs", func() bool { return r.Started() == 20 })
}

// Ensure Wake claims for an agent at once, however far its next tick is,
// and says whether the scheduler has the agent.
func TestScheduler_Wake(t *testing.T) {
	q := memlease.New()
	r := &Runner{}
	s := scheduler.New(scheduler.Config{Queue: q, Runner: r, Owner: "test"})
	s.Set([]scheduler.Agent{{Name: "daily", Schedule: onceAt{time.Now().Add(time.Hour)}, Parallel: 2, Lease: time.Minute}}, nil)
	start(t, s)
	MustEnqueue(t, q, "a", "daily")
	begin := time.Now()
	if !s.Wake("daily") {
		t.Fatal("Wake of a configured agent reported false")
	}
	waitFor(t, 2*time.Second, "the woken claim", func() bool { return r.Started() == 1 })
	t.Logf("wake to start: %s", time.Since(begin))
	MustEnqueue(t, q, "b", "daily")
	s.Wake("daily")
	waitFor(t, 2*time.Second, "the second woken claim", func() bool { return r.Started() == 2 })
	if s.Wake("nobody") {
		t.Error("Wake of an unknown agent reported true")
	}
}

// onceAt fires at its time and then not for a day.
type onceAt struct{ at time.Time }

func (o onceAt) Next(t time.Time) time.Time {
	if t.Before(o.at) {
		return o.at
	}
	return t.Add(24 * time.Hour)
}

// Ensure several schedulers sharing one queue enqueue each periodic tick
// exactly once, because @every ticks are aligned and recorded in the queue.
func TestScheduler_PeriodicExactlyOnce(t *testing.T) {
	q := memlease.New()
	p := scheduler.Periodic{Name: "nightly", Schedule: MustSchedule(t, "@every 1s"),
		Task: lease.EnqueueParams{Lane: "p", Agent: "job"}}
	began := time.Now()
	for i := range 4 {
		s := scheduler.New(scheduler.Config{Queue: q, Runner: &Runner{}, Owner: fmt.Sprint("d", i)})
		s.Set(nil, []scheduler.Periodic{p})
		start(t, s)
	}
	time.Sleep(3500 * time.Millisecond)
	ticks := int(time.Since(began)/time.Second) + 1
	tasks, err := q.Tasks(context.Background(), lease.TaskFilter{Lane: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) < 2 || len(tasks) > ticks {
		t.Fatalf("4 schedulers enqueued %d tasks in %d ticks; want one per tick", len(tasks), ticks)
	}
}

// Ensure ticks missed while no daemon ran are skipped by default and run
// once with catch-up.
func TestScheduler_CatchUp(t *testing.T) {
	for _, tt := range []struct {
		catchUp bool
		want    int
	}{{false, 0}, {true, 1}} {
		t.Run(fmt.Sprintf("CatchUp=%v", tt.catchUp), func(t *testing.T) {
			q := memlease.New()
			sched := MustSchedule(t, "0 * * * *")
			past := time.Now().Add(-5 * time.Hour).Truncate(time.Hour)
			if _, err := q.PeriodicTick(context.Background(), "hourly", past, lease.EnqueueParams{Lane: "h", Agent: "job"}); err != nil {
				t.Fatal(err)
			}
			s := scheduler.New(scheduler.Config{Queue: q, Runner: &Runner{}, Owner: "d"})
			s.Set(nil, []scheduler.Periodic{{Name: "hourly", Schedule: sched, CatchUp: tt.catchUp,
				Task: lease.EnqueueParams{Lane: "h", Agent: "job"}}})
			start(t, s)
			time.Sleep(300 * time.Millisecond)
			tasks, _ := q.Tasks(context.Background(), lease.TaskFilter{Lane: "h"})
			if got := len(tasks) - 1; got != tt.want {
				t.Fatalf("enqueued %d tasks for missed ticks, want %d", got, tt.want)
			}
			last, _ := q.PeriodicLast(context.Background(), "hourly")
			if tt.catchUp && !last.Equal(time.Now().Truncate(time.Hour)) {
				t.Errorf("last tick %s, want the latest missed tick %s", last, time.Now().Truncate(time.Hour))
			}
		})
	}
}

// Ensure @every ticks are aligned to their interval, whatever the start
// time, and counting missed ticks stops at now.
func TestNext(t *testing.T) {
	every := MustSchedule(t, "@every 30s")
	base := time.Date(2026, 3, 1, 12, 0, 7, 0, time.UTC)
	tests := []struct {
		sched cron.Schedule
		from  time.Time
		want  time.Time
	}{
		{every, base, time.Date(2026, 3, 1, 12, 0, 30, 0, time.UTC)},
		{every, base.Add(23 * time.Second), time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC)},
		{MustSchedule(t, "15 * * * *"), base, time.Date(2026, 3, 1, 12, 15, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		if got := scheduler.Next(tt.sched, tt.from); !got.Equal(tt.want) {
			t.Errorf("Next(%v) = %s, want %s", tt.from, got, tt.want)
		}
	}
	n, latest := scheduler.Missed(every, base, base.Add(95*time.Second))
	if n != 3 || !latest.Equal(time.Date(2026, 3, 1, 12, 1, 30, 0, time.UTC)) {
		t.Errorf("Missed = %d, %s; want 3, 12:01:30", n, latest)
	}
}

// Ensure a reload while the agent's claim is in flight does not leave the
// agent marked busy for good: later ticks claim with the new settings.
func TestScheduler_ReloadDuringClaim(t *testing.T) {
	q := memlease.New()
	for _, lane := range []string{"a", "b", "c"} {
		MustEnqueue(t, q, lane, "w")
	}
	hold := make(chan struct{})
	var once sync.Once
	r := &Runner{OnStart: func(string, *lease.Lease) { once.Do(func() { <-hold }) }}
	s := scheduler.New(scheduler.Config{Queue: q, Runner: r, Owner: "test"})
	agent := scheduler.Agent{Name: "w", Schedule: MustSchedule(t, "@every 1s"), Parallel: 1, Lease: time.Minute}
	s.Set([]scheduler.Agent{agent}, nil)
	start(t, s)
	waitFor(t, 3*time.Second, "the first claim to start a run", func() bool { return r.Started() == 1 })
	agent.Parallel = 3
	s.Set([]scheduler.Agent{agent}, nil)
	close(hold)
	waitFor(t, 5*time.Second, "ticks after the reload to claim the other two tasks", func() bool { return r.Started() == 3 })
}

// Ensure a periodic task for an agent this scheduler runs is claimed at
// once, not at the agent's next tick an hour away.
func TestScheduler_PeriodicWakesAgent(t *testing.T) {
	q := memlease.New()
	r := &Runner{}
	s := scheduler.New(scheduler.Config{Queue: q, Runner: r, Owner: "test"})
	s.Set([]scheduler.Agent{{Name: "nightly", Schedule: onceAt{time.Now().Add(time.Hour)}, Parallel: 1, Lease: time.Minute}},
		[]scheduler.Periodic{{Name: "p", Schedule: MustSchedule(t, "@every 1s"), Task: lease.EnqueueParams{Lane: "l", Agent: "nightly"}}})
	start(t, s)
	waitFor(t, 5*time.Second, "the periodic task to be claimed at once", func() bool { return r.Started() >= 1 })
}

// Ensure a step back of the wall clock does not stop an agent's schedule
// for as long as the step: its next tick stays within one interval of the
// clock, and it claims again.
func TestScheduler_ClockStepsBack(t *testing.T) {
	var mu sync.Mutex
	offset := time.Duration(0)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Round(0).Add(offset)
	}
	q := memlease.New()
	r := &Runner{}
	s := scheduler.New(scheduler.Config{Queue: q, Runner: r, Logger: hclog.NewNullLogger(), Owner: "test", Now: now})
	s.Set([]scheduler.Agent{{Name: "build", Schedule: MustSchedule(t, "@every 1s"), Parallel: 3, Lease: time.Minute}}, nil)
	start(t, s)
	time.Sleep(1500 * time.Millisecond)
	mu.Lock()
	offset = -time.Hour
	mu.Unlock()
	time.Sleep(1500 * time.Millisecond)
	next, _ := s.NextTicks()
	if d := next["build"].Sub(now()); d > time.Second {
		t.Fatalf("after the clock stepped back an hour the next tick is %s away, want at most 1s", d)
	}
	MustEnqueue(t, q, "lane", "build")
	waitFor(t, 3*time.Second, "a claim after the step back", func() bool { return r.Started() == 1 })
}

// Ensure an agent held back by a limit claims again when the next unit is
// due, not at every tick and not in a loop: one claim a unit or so, and
// each unit's run started soon after it was due.
func TestScheduler_HeldByLimit(t *testing.T) {
	q := memlease.New()
	burst := 0
	if _, err := q.SetLimit(context.Background(), lease.LimitUpdate{Name: "api", Rate: 10, Per: time.Second, Burst: &burst}); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		MustEnqueue(t, q, "l", "spend")
	}
	if _, err := q.SetLane(context.Background(), lease.LaneUpdate{Name: "l", MaxRunning: new(100)}); err != nil {
		t.Fatal(err)
	}
	r := &Runner{}
	var mu sync.Mutex
	claims := 0
	s := scheduler.New(scheduler.Config{Queue: q, Runner: r, Logger: hclog.NewNullLogger(), Owner: "test",
		OnClaim: func(string, int, time.Duration, error) { mu.Lock(); claims++; mu.Unlock() }})
	s.Set([]scheduler.Agent{{Name: "spend", Schedule: MustSchedule(t, "@every 1h"), Parallel: 100, Lease: time.Minute,
		Limits: []string{"api"}}}, nil)
	start(t, s)
	s.Wake("spend")
	time.Sleep(1050 * time.Millisecond)
	got := r.Started()
	mu.Lock()
	n := claims
	mu.Unlock()
	// 10/s from a full bucket of one: 1 at once, then one per 100 ms.
	if got < 9 || got > 11 {
		t.Errorf("started %d runs in about 1 s under a limit of 10/1s, want 10 or so", got)
	}
	if n > 2*got+2 {
		t.Errorf("%d claims for %d runs: the scheduler polls instead of sleeping until the next unit", n, got)
	}
}
