package notify

import (
	"context"
	"errors"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
)

// Queue is what the sender needs of the queue.
type Queue interface {
	RecordEvent(ctx context.Context, runID int64, event string) error
	TakeEvents(ctx context.Context, by string, routes []lease.NotifyRoute, limit int) (int, error)
	ClaimNotifications(ctx context.Context, c lease.NotifyClaim) (claimed, gaveUp []lease.NotificationJob, err error)
	FinishNotification(ctx context.Context, id int64, try int, r lease.NotifyResult) error
}

// Config wires a Sender.
type Config struct {
	Queue  Queue
	Logger hclog.Logger
	// Env is the environment of commands, before the QD_ variables.
	Env []string
	// Daemon names the sender in records.
	Daemon string
	// Plan is read at every poll.
	Plan func() Plan
	// Poll is how often the queue is read for events and due
	// notifications when nothing wakes the sender sooner; one second when
	// zero. A plan with no routes is not polled: the sender sleeps until
	// Kick (a run ended, the config reloaded) or Record.
	Poll time.Duration
}

// Sender sends notifications from the queue; see Run.
type Sender struct {
	cfg  Config
	host string
	kick chan struct{}

	mu       sync.Mutex
	targets  map[string]*target // by Target.String
	recorded []recordReq        // RecordEvent calls not yet written

	sent, failed, retried atomic.Uint64
	sends                 sync.WaitGroup
}

type recordReq struct {
	runID int64
	event string
}

// target is the sender's view of one target: tries under way, and whether
// it is down (its last try failed), when it may be probed next.
type target struct {
	inflight  int
	fails     int
	since     time.Time
	nextProbe time.Time
	lastErr   string
}

// New returns a Sender; start Run to send.
func New(cfg Config) *Sender {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.Plan == nil {
		cfg.Plan = func() Plan { return Plan{} }
	}
	host, _ := os.Hostname()
	return &Sender{cfg: cfg, host: host, kick: make(chan struct{}, 1), targets: map[string]*target{}}
}

// Kick wakes the sender to read the queue now: an event may be waiting.
// It never blocks.
func (s *Sender) Kick() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// Record records that run runID met event (one only this daemon saw, such
// as a lost lease) at the sender's next poll, retried until the queue
// takes it. It never blocks.
func (s *Sender) Record(runID int64, event string) {
	s.mu.Lock()
	s.recorded = append(s.recorded, recordReq{runID, event})
	s.mu.Unlock()
	s.Kick()
}

// Counts says what the sender did since it started.
func (s *Sender) Counts() Counts {
	c := Counts{Sent: s.sent.Load(), Failed: s.failed.Load(), Retried: s.retried.Load()}
	s.mu.Lock()
	for name, t := range s.targets {
		if t.fails > 0 {
			c.Down = append(c.Down, Down{Target: name, Since: t.since, Fails: t.fails, Error: t.lastErr})
		}
	}
	s.mu.Unlock()
	sort.Slice(c.Down, func(i, j int) bool { return c.Down[i].Target < c.Down[j].Target })
	return c
}

// Run polls the queue until ctx ends: it writes the recorded events, takes
// the events of the plan's routes into notifications, claims the due
// notifications of its targets and tells each from a goroutine of its
// own, so that no target waits on another. When ctx ends it claims no
// more and waits up to drainGrace for the tries under way.
func (s *Sender) Run(ctx context.Context) error {
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			s.drain(cancel)
			return nil
		case <-timer.C:
		case <-s.kick:
		}
		if s.poll(ctx, sendCtx) {
			timer.Reset(s.cfg.Poll)
		}
	}
}

// drainGrace is how long a stopping sender waits for the tries under way.
const drainGrace = 5 * time.Second

func (s *Sender) drain(cancel context.CancelFunc) {
	done := make(chan struct{})
	go func() { s.sends.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(drainGrace):
		cancel() // the rest are recorded as pending, to be tried again
		<-done
	}
}

// poll does one round; a failure is logged and the next poll tries again.
// It reports whether another poll is due: the plan has routes, or events
// wait to be recorded.
func (s *Sender) poll(ctx, sendCtx context.Context) (again bool) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	s.flushRecorded(ctx)
	plan := s.cfg.Plan()
	routes, byName := s.routes(plan)
	s.forget(byName)
	if len(routes) == 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.recorded) > 0
	}
	s.pollRoutes(ctx, sendCtx, plan, routes, byName)
	return true
}

// pollRoutes takes the events of routes into notifications and starts
// the claimed ones.
func (s *Sender) pollRoutes(ctx, sendCtx context.Context, plan Plan, routes []lease.NotifyRoute, byName map[string]Target) {
	if _, err := s.cfg.Queue.TakeEvents(ctx, s.cfg.Daemon, routes, 1000); err != nil {
		s.cfg.Logger.Warn("read events to notify of; will try again", "error", err)
		return
	}
	c := lease.NotifyClaim{By: s.cfg.Daemon, GiveUp: plan.giveUp()}
	var longest time.Duration
	for name, t := range byName {
		if n := s.room(name); n > 0 {
			c.Targets = append(c.Targets, lease.NotifyTargetClaim{Target: name, N: n})
			longest = max(longest, plan.timeout(t))
		}
	}
	if len(c.Targets) == 0 {
		return
	}
	c.Lease = longest + claimMargin
	claimed, gaveUp, err := s.cfg.Queue.ClaimNotifications(ctx, c)
	if err != nil {
		s.cfg.Logger.Warn("claim notifications; will try again", "error", err)
		return
	}
	for _, j := range gaveUp {
		s.failed.Add(1)
		s.cfg.Logger.Error("notification failed for good", "event", j.Event, "task_id", j.TaskID, "run_id", j.RunID,
			"target", j.Target, "detail", j.Detail)
	}
	for _, j := range claimed {
		s.start(sendCtx, j, byName[j.Target], plan)
	}
}

// claimMargin is how long a claimed notification outlives its try's
// timeout: time to record how the try went.
const claimMargin = 15 * time.Second

// routes is the plan's routes as the queue takes them, and the targets by
// name.
func (s *Sender) routes(plan Plan) ([]lease.NotifyRoute, map[string]Target) {
	var out []lease.NotifyRoute
	byName := map[string]Target{}
	for _, r := range plan.Routes {
		name := r.Target.String()
		byName[name] = r.Target
		out = append(out, lease.NotifyRoute{Agent: r.Agent, Event: r.Event, Target: name})
	}
	return out, byName
}

// room says how many notifications of target name to claim now: those
// PerTarget leaves room for, or while it is down one probe at a time,
// once its backoff has passed.
func (s *Sender) room(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[name]
	switch {
	case t == nil:
		return PerTarget
	case t.fails == 0:
		return PerTarget - t.inflight
	case t.inflight == 0 && !time.Now().Before(t.nextProbe):
		return 1
	}
	return 0
}

// flushRecorded writes the events Record was given.
func (s *Sender) flushRecorded(ctx context.Context) {
	s.mu.Lock()
	todo := s.recorded
	s.recorded = nil
	s.mu.Unlock()
	var again []recordReq
	for _, r := range todo {
		err := s.cfg.Queue.RecordEvent(ctx, r.runID, r.event)
		switch {
		case errors.Is(err, lease.ErrNotFound) || errors.Is(err, lease.ErrInvalid):
			s.cfg.Logger.Warn("event not recorded", "run_id", r.runID, "event", r.event, "error", err)
		case err != nil:
			again = append(again, r)
		}
	}
	if len(again) > 0 {
		s.cfg.Logger.Warn("record events; will try again", "events", len(again))
		s.mu.Lock()
		s.recorded = append(again, s.recorded...)
		s.mu.Unlock()
	}
}

// forget drops what the sender knows of targets a reload removed, once
// no try of theirs is under way, so that Counts no longer reports them.
func (s *Sender) forget(byName map[string]Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, t := range s.targets {
		if _, ok := byName[name]; !ok && t.inflight == 0 {
			delete(s.targets, name)
		}
	}
}
