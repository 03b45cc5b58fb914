package scheduler

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/qd-run/qd/lease"
	"github.com/robfig/cron/v3"
)

// Queue is what the scheduler needs from a lease.Provider.
type Queue interface {
	ClaimMany(ctx context.Context, p lease.ClaimParams, n int) ([]*lease.Lease, error)
	PeriodicTick(ctx context.Context, name string, tick time.Time, p lease.EnqueueParams) (bool, error)
	PeriodicLast(ctx context.Context, name string) (time.Time, error)
}

// Runner starts claimed runs; the supervisor implements it.
type Runner interface {
	// Running returns how many runs of agent are alive.
	Running(agent string) int
	// Start runs a claimed lease for agent. It owns the lease from then on,
	// even when it returns an error. claimed is when the claim was sent, the
	// conservative start of the lease on the local monotonic clock.
	Start(agent string, l *lease.Lease, claimed time.Time) error
}

// Agent is one agent's schedule and claim parameters.
type Agent struct {
	Name     string
	Schedule cron.Schedule
	Spec     string // the schedule as written, for status
	Lanes    []string
	Parallel int
	Lease    time.Duration
	// Limits are the rate limits each of its runs takes a unit of.
	Limits []string
	// Budget is the budget its runs spend from; "" for none.
	Budget string
}

// Periodic enqueues a task on a schedule.
type Periodic struct {
	Name     string
	Schedule cron.Schedule
	CatchUp  bool // run one missed tick at start-up
	Task     lease.EnqueueParams
}

// Config wires a Scheduler.
type Config struct {
	Queue    Queue
	Runner   Runner
	Logger   hclog.Logger
	Owner    string
	Instance string
	// Now returns the time; time.Now when nil.
	Now func() time.Time
	// OnClaim, when set, is told of every claim call: the agent, how many
	// runs it got, how long it took, and its error (a shutdown's
	// cancellation is not told). It must not block.
	OnClaim func(agent string, n int, took time.Duration, err error)
}

// Scheduler fires agent ticks and periodic enqueues.
type Scheduler struct {
	cfg    Config
	logger hclog.Logger
	now    func() time.Time
	wake   chan struct{}
	wg     sync.WaitGroup
	ctx    context.Context // Run's, for claims started by Kick

	mu        sync.Mutex
	agents    map[string]*agentState
	periodics map[string]*periodicState
	paused    bool
}

type agentState struct {
	Agent
	ticks                 // busy: a claim for this agent is in flight
	ended   chan struct{} // poked by Kick, for gather
	kicked  bool          // a run ended while the claim was in flight
	woken   bool          // Wake was called: claim at once, or again after the claim in flight
	hot     bool          // the last claim filled every free slot: claim again when a run ends
	removed bool
	// held is when to claim again after a rate limit held a claim back:
	// when its next unit is due, with jitter; ticks before it claim
	// nothing. Zero when no limit holds the agent.
	held time.Time
}

type periodicState struct {
	Periodic
	ticks // busy: its enqueue is in flight
}

// ticks is where an agent or a periodic stands on its schedule.
type ticks struct {
	next time.Time // the next tick
	busy bool      // the work of an earlier tick is in flight
}

// due reports whether the tick at next has come and its work may start,
// and returns that tick. A tick that has come moves next on past now, but
// while the work of an earlier one is busy it is skipped, not queued. When
// the work may start, due marks it busy. When the wall clock stepped back
// (next lies further ahead than the schedule's first tick after now), next
// becomes that tick: otherwise a step back of an hour would stop the
// schedule for an hour.
func (t *ticks) due(sched cron.Schedule, now time.Time) (time.Time, bool) {
	if !t.next.IsZero() {
		if first := Next(sched, now); first.Before(t.next) {
			t.next = first
		}
	}
	if t.next.IsZero() || t.next.After(now) {
		return time.Time{}, false
	}
	tick := t.next
	t.next = Next(sched, now)
	if t.busy {
		return time.Time{}, false
	}
	t.busy = true
	return tick, true
}

// New returns a scheduler with no agents; call Set, then Run.
func New(cfg Config) *Scheduler {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	logger := cfg.Logger
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Scheduler{
		cfg:       cfg,
		logger:    logger,
		now:       now,
		wake:      make(chan struct{}, 1),
		agents:    map[string]*agentState{},
		periodics: map[string]*periodicState{},
	}
}

// Set replaces the agents and periodic schedules. Runs already started are
// not touched; a removed agent simply gets no more ticks.
func (s *Scheduler) Set(agents []Agent, periodics []Periodic) {
	now := s.now()
	s.mu.Lock()
	old := s.agents
	s.agents = map[string]*agentState{}
	for _, a := range agents {
		if prev, ok := old[a.Name]; ok {
			// The same state, so that a claim in flight still clears its
			// busy flag; claims read the settings through settings().
			prev.Agent, prev.next, prev.removed = a, Next(a.Schedule, now), false
			s.agents[a.Name] = prev
			continue
		}
		s.agents[a.Name] = &agentState{Agent: a, ticks: ticks{next: Next(a.Schedule, now)}, ended: make(chan struct{}, 1)}
	}
	for name, prev := range old {
		if _, ok := s.agents[name]; !ok {
			prev.removed = true
		}
	}
	s.periodics = map[string]*periodicState{}
	for _, p := range periodics {
		s.periodics[p.Name] = &periodicState{Periodic: p, ticks: ticks{next: Next(p.Schedule, now)}}
	}
	s.mu.Unlock()
	s.poke()
}

// NextTicks returns each agent's and each periodic schedule's next tick,
// for status (the two share no names: both are keyed by name in their own
// map).
func (s *Scheduler) NextTicks() (agents, periodics map[string]time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	agents = make(map[string]time.Time, len(s.agents))
	for name, a := range s.agents {
		agents[name] = a.next
	}
	periodics = make(map[string]time.Time, len(s.periodics))
	for name, p := range s.periodics {
		periodics[name] = p.next
	}
	return agents, periodics
}

// Kick asks for another claim for agent when its last claim found more work
// than it had room for. The supervisor calls it when a run of agent ends.
func (s *Scheduler) Kick(agent string) {
	s.mu.Lock()
	a := s.agents[agent]
	if a != nil {
		select {
		case a.ended <- struct{}{}:
		default:
		}
	}
	if a != nil && a.busy {
		a.kicked = true // the claim in flight looks again when it is done
	}
	if a == nil || !a.hot || a.busy || s.paused || s.ctx == nil {
		s.mu.Unlock()
		return
	}
	a.busy = true
	ctx := s.ctx
	s.wg.Add(1)
	s.mu.Unlock()
	go s.claim(ctx, a, true)
}

// Wake claims for agent at once, as a tick of its schedule would: a task
// was just enqueued for it on this host (`qd enqueue`, `qd run-now`). When
// a claim is in flight it claims once more when that one is done. It
// reports false when the scheduler has no agent of that name.
func (s *Scheduler) Wake(agent string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.agents[agent]
	if a == nil || a.removed {
		return false
	}
	a.woken = true
	s.poke()
	return true
}

// Run fires ticks until ctx ends, then waits for claims in flight. It
// catches up missed periodic ticks first.
func (s *Scheduler) Run(ctx context.Context) error {
	s.mu.Lock()
	s.ctx = ctx
	s.mu.Unlock()
	s.catchUp(ctx)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.fire(ctx)
		timer.Reset(s.untilNext())
		select {
		case <-ctx.Done():
			s.mu.Lock()
			s.paused = true
			s.mu.Unlock()
			s.wg.Wait()
			return nil
		case <-timer.C:
		case <-s.wake:
		}
	}
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) untilNext() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := time.Time{}
	for _, a := range s.agents {
		if !a.next.IsZero() && (next.IsZero() || a.next.Before(next)) {
			next = a.next
		}
		if !a.held.IsZero() && (next.IsZero() || a.held.Before(next)) {
			next = a.held
		}
	}
	for _, p := range s.periodics {
		if !p.next.IsZero() && (next.IsZero() || p.next.Before(next)) {
			next = p.next
		}
	}
	if next.IsZero() {
		return time.Hour
	}
	return max(next.Sub(s.now()), 0)
}

// fire starts the work of every tick that is due.
func (s *Scheduler) fire(ctx context.Context) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.agents {
		_, due := a.due(a.Schedule, now)
		if due && a.held.After(now) {
			// Held by a limit: the claim at a.held takes the tick's work.
			a.busy, due, a.woken = false, false, false
		}
		if !due && (a.woken || !a.held.IsZero() && !a.held.After(now)) && !a.busy && !a.held.After(now) {
			a.busy, due = true, true
		}
		if due {
			a.woken, a.held = false, time.Time{}
			s.wg.Add(1)
			go s.claim(ctx, a, false)
		}
	}
	for _, p := range s.periodics {
		if tick, ok := p.due(p.Schedule, now); ok {
			s.wg.Add(1)
			go s.enqueue(ctx, p, tick)
		}
	}
}

// claim fills the agent's free slots, again while runs that ended during
// the claim left the agent hot. A claim for runs that ended (kicked)
// first gathers more of them for a moment, so that a busy agent claims
// several slots per transaction rather than one.
func (s *Scheduler) claim(ctx context.Context, a *agentState, kicked bool) {
	defer s.wg.Done()
	for {
		if kicked {
			s.gather(ctx, a)
		}
		kicked = true
		s.claimOnce(ctx, a)
		s.mu.Lock()
		again := (a.kicked && a.hot || a.woken) && !a.removed && !s.paused && ctx.Err() == nil
		a.kicked, a.woken = false, false
		if !again {
			a.busy = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
	}
}

// gatherWindow bounds how long a kicked claim waits for more slots.
const gatherWindow = 5 * time.Millisecond

// gather waits until a quarter of the agent's slots are free, or
// gatherWindow has passed, or ctx ends.
func (s *Scheduler) gather(ctx context.Context, a *agentState) {
	ag := s.settings(a)
	want := max(1, ag.Parallel/4)
	timer := time.NewTimer(gatherWindow)
	defer timer.Stop()
	for ag.Parallel-s.cfg.Runner.Running(ag.Name) < want {
		select {
		case <-a.ended:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// settings returns the agent's settings as they are now (a reload may
// change them while a claim is in flight).
func (s *Scheduler) settings(a *agentState) Agent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return a.Agent
}

// claimOnce claims as many tasks as the agent has free slots. A tick that
// finds the agent full does nothing.
func (s *Scheduler) claimOnce(ctx context.Context, a *agentState) {
	ag := s.settings(a)
	free := ag.Parallel - s.cfg.Runner.Running(ag.Name)
	if free <= 0 {
		return
	}
	claimed := time.Now()
	leases, err := s.cfg.Queue.ClaimMany(ctx, lease.ClaimParams{
		Lanes:    ag.Lanes,
		Agent:    ag.Name,
		Owner:    s.cfg.Owner,
		Instance: s.cfg.Instance,
		Lease:    ag.Lease,
		Limits:   ag.Limits,
		Budget:   ag.Budget,
	}, free)
	var held *lease.HeldError
	if errors.As(err, &held) {
		s.hold(a, held)
		err = nil
	}
	if s.cfg.OnClaim != nil && !errors.Is(err, context.Canceled) {
		s.cfg.OnClaim(ag.Name, len(leases), time.Since(claimed), err)
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			s.logger.Warn("claim failed; the next tick retries", "agent", ag.Name, "error", err)
		}
		return
	}
	s.mu.Lock()
	a.hot = len(leases) == free && !a.removed
	if len(ag.Limits) > 0 && len(leases) > 0 && len(leases) < free {
		// A limit may have cut the claim short: ask again, and learn
		// from the answer when its next unit is due.
		a.woken = true
	}
	s.mu.Unlock()
	s.start(ag.Name, leases, claimed)
}

// hold makes the agent claim again when the unit a limit held its claim
// back for is due, a little later at random: the daemons waiting on one
// limit then do not all wake at once, and the first takes the unit.
func (s *Scheduler) hold(a *agentState, h *lease.HeldError) {
	jitter := time.Duration(rand.Int64N(int64(min(max(h.In/4, 10*time.Millisecond), time.Second))))
	at := s.now().Add(max(h.In, 0) + jitter)
	s.logger.Debug("claim held back", "agent", a.Name, "limit", h.Limit, "budget", h.Budget, "ask_again_in", h.In)
	s.mu.Lock()
	a.held = at
	s.mu.Unlock()
	s.poke()
}

// startParallel bounds how many runs of one claim start at once: the
// supervisor starts children from a few spawner threads, so the children of
// a claim need not wait for one another.
const startParallel = 4

// start hands the leases of one claim to the runner, several at a time,
// and returns when every one has been handed over.
func (s *Scheduler) start(agent string, leases []*lease.Lease, claimed time.Time) {
	one := func(l *lease.Lease) {
		if err := s.cfg.Runner.Start(agent, l, claimed); err != nil {
			s.logger.Error("start run", "agent", agent, "run_id", l.RunID, "task_id", l.TaskID, "error", err)
		}
	}
	if len(leases) == 1 {
		one(leases[0])
		return
	}
	next := make(chan *lease.Lease, len(leases))
	for _, l := range leases {
		next <- l
	}
	close(next)
	var wg sync.WaitGroup
	for range min(startParallel, len(leases)) {
		wg.Go(func() {
			for l := range next {
				one(l)
			}
		})
	}
	wg.Wait()
}

func (s *Scheduler) enqueue(ctx context.Context, p *periodicState, tick time.Time) {
	defer s.wg.Done()
	defer func() {
		s.mu.Lock()
		p.busy = false
		s.mu.Unlock()
	}()
	s.tick(ctx, p.Periodic, tick)
}

func (s *Scheduler) tick(ctx context.Context, p Periodic, tick time.Time) {
	ok, err := s.cfg.Queue.PeriodicTick(ctx, p.Name, tick, p.Task)
	switch {
	case err != nil:
		s.logger.Warn("periodic enqueue failed", "periodic", p.Name, "tick", tick, "error", err)
	case ok:
		s.logger.Debug("periodic enqueued", "periodic", p.Name, "tick", tick)
		s.Wake(p.Task.Agent) // runs at once when this daemon runs the agent
	}
}

// catchUp handles ticks missed while no daemon ran: one is enqueued when the
// periodic asks for it, otherwise they are logged as skipped.
func (s *Scheduler) catchUp(ctx context.Context) {
	s.mu.Lock()
	var ps []Periodic
	for _, p := range s.periodics {
		ps = append(ps, p.Periodic)
	}
	s.mu.Unlock()
	sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
	now := s.now()
	for _, p := range ps {
		last, err := s.cfg.Queue.PeriodicLast(ctx, p.Name)
		if err != nil {
			s.logger.Warn("read last periodic tick", "periodic", p.Name, "error", err)
			continue
		}
		if last.IsZero() {
			continue
		}
		missed, latest := Missed(p.Schedule, last, now)
		if missed == 0 {
			continue
		}
		if p.CatchUp {
			s.logger.Info("catching up a missed periodic tick", "periodic", p.Name, "tick", latest, "missed", missed)
			s.tick(ctx, p, latest)
			continue
		}
		s.logger.Info("skipped periodic ticks missed while no daemon ran", "periodic", p.Name, "missed", missed, "last", last)
	}
}

// Next returns the first tick of sched after t. Constant-delay schedules
// (@every) are aligned to multiples of their interval counted from a fixed
// origin, so every daemon computes the same ticks whenever it started.
func Next(sched cron.Schedule, t time.Time) time.Time {
	if c, ok := sched.(cron.ConstantDelaySchedule); ok && c.Delay > 0 {
		d := c.Delay
		return t.Truncate(d).Add(d)
	}
	return sched.Next(t)
}

// Missed counts the ticks after last and at or before now (up to a bound)
// and returns the latest of them.
func Missed(sched cron.Schedule, last, now time.Time) (int, time.Time) {
	n, latest := 0, time.Time{}
	for t := Next(sched, last); !t.IsZero() && !t.After(now); t = Next(sched, t) {
		n, latest = n+1, t
		if n >= 100000 {
			break
		}
	}
	return n, latest
}
