package memlease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/qd-run/qd/lease"
)

var _ lease.Provider = (*Provider)(nil)

// Provider is an in-memory queue. The zero value is not usable; call New.
type Provider struct {
	mu       sync.Mutex
	closed   bool
	lanes    map[string]*lease.Lane
	tasks    map[int64]*lease.Task
	runs     map[int64]*lease.Run
	live     map[int64]*lease.Run // runs whose state is running
	tokens   map[string][]int64   // claim token → the runs its claim made
	periodic map[string]time.Time
	paused   map[string]lease.AgentPause // agent → its pause (agent.go)
	lastTask int64
	lastRun  int64
	// The outbox and the notifications made from it (notifications.go).
	events    []*event
	lastEvent int64
	notes     map[int64]*lease.Notification
	lastNote  int64
	chain     chain
	limits    map[string]*rateLimit // the rate limits (limits.go)
	budgets   map[string]*budget    // the budgets (budgets.go)
}

// New returns an empty provider.
func New() *Provider {
	return &Provider{
		lanes:    map[string]*lease.Lane{},
		tasks:    map[int64]*lease.Task{},
		runs:     map[int64]*lease.Run{},
		live:     map[int64]*lease.Run{},
		periodic: map[string]time.Time{},
		paused:   map[string]lease.AgentPause{},
		notes:    map[int64]*lease.Notification{},
		chain:    newChain(),
	}
}

// lock checks ctx and takes the mutex; it returns the provider's clock.
func (p *Provider) lock(ctx context.Context) (time.Time, error) {
	if err := ctx.Err(); err != nil {
		return time.Time{}, err
	}
	p.mu.Lock()
	return time.Now(), nil
}

// Ping reports an error once the provider is closed.
func (p *Provider) Ping(ctx context.Context) error {
	if _, err := p.lock(ctx); err != nil {
		return fmt.Errorf("ping queue: %w", err)
	}
	defer p.mu.Unlock()
	if p.closed {
		return errors.New("ping queue: provider is closed")
	}
	return nil
}

// Close marks the provider closed. Its data stays readable.
func (p *Provider) Close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
}

// Enqueue adds a task, or returns the unfinished task with the same dedupe key.
func (p *Provider) Enqueue(ctx context.Context, ep lease.EnqueueParams) (int64, bool, error) {
	if err := lease.ValidateEnqueue(&ep); err != nil {
		return 0, false, fmt.Errorf("enqueue task: %w", err)
	}
	now, err := p.lock(ctx)
	if err != nil {
		return 0, false, fmt.Errorf("enqueue task: %w", err)
	}
	defer p.mu.Unlock()
	if err := p.checkAfter(ep.After); err != nil {
		return 0, false, fmt.Errorf("enqueue task: %w", err)
	}
	id, existed := p.enqueue(ep, now)
	if !existed && len(ep.After) > 0 {
		p.wait(id, now)
	}
	return id, existed, nil
}

func (p *Provider) enqueue(ep lease.EnqueueParams, now time.Time) (int64, bool) {
	if t := p.unfinishedWithKey(ep.DedupeKey); t != nil {
		return t.ID, true
	}
	p.ensureLane(ep.Lane)
	runAfter := ep.RunAfter
	if runAfter.IsZero() {
		runAfter = now.Add(ep.Delay)
	}
	p.lastTask++
	p.tasks[p.lastTask] = &lease.Task{
		ID:          p.lastTask,
		Lane:        ep.Lane,
		Agent:       ep.Agent,
		Payload:     bytes.Clone(ep.Payload),
		Priority:    ep.Priority,
		RunAfter:    runAfter,
		MaxAttempts: ep.MaxAttempts,
		State:       lease.TaskQueued,
		DedupeKey:   ep.DedupeKey,
		ParentRun:   ep.ParentRun,
		After:       slices.Clone(ep.After),
		AfterAny:    ep.AfterAny,
		CreatedAt:   now,
		UpdatedAt:   now,
	}
	return p.lastTask, false
}

func (p *Provider) unfinishedWithKey(key string) *lease.Task {
	if key == "" {
		return nil
	}
	for _, t := range p.tasks {
		if t.DedupeKey == key && !t.State.Finished() {
			return t
		}
	}
	return nil
}

func (p *Provider) ensureLane(name string) *lease.Lane {
	l := p.lanes[name]
	if l == nil {
		l = &lease.Lane{Name: name, MaxRunning: 1}
		p.lanes[name] = l
	}
	return l
}

// SetLane creates or changes a lane.
func (p *Provider) SetLane(ctx context.Context, u lease.LaneUpdate) (lease.Lane, error) {
	if !lease.ValidName(u.Name) {
		return lease.Lane{}, fmt.Errorf("set lane: %w: lane %q does not match %s", lease.ErrInvalid, u.Name, lease.LanePattern)
	}
	if u.MaxRunning != nil {
		if err := lease.CheckLaneLimit(*u.MaxRunning); err != nil {
			return lease.Lane{}, fmt.Errorf("set lane %s: %w", u.Name, err)
		}
	}
	_, err := p.lock(ctx)
	if err != nil {
		return lease.Lane{}, fmt.Errorf("set lane %s: %w", u.Name, err)
	}
	defer p.mu.Unlock()
	l := p.ensureLane(u.Name)
	if u.MaxRunning != nil {
		l.MaxRunning = *u.MaxRunning
	}
	if u.Paused != nil {
		l.Paused = *u.Paused
	}
	if u.SetBy != "" {
		l.SetBy = u.SetBy
	}
	return p.laneView(l), nil
}

// Lanes lists every lane by name with its running and queued counts.
func (p *Provider) Lanes(ctx context.Context) ([]lease.Lane, error) {
	_, err := p.lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("list lanes: %w", err)
	}
	defer p.mu.Unlock()
	out := make([]lease.Lane, 0, len(p.lanes))
	for _, l := range p.lanes {
		out = append(out, p.laneView(l))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (p *Provider) laneView(l *lease.Lane) lease.Lane {
	v := *l
	for _, r := range p.live {
		if r.Lane == l.Name {
			v.Running++
		}
	}
	for _, t := range p.tasks {
		if t.Lane != l.Name || t.State != lease.TaskQueued {
			continue
		}
		v.Queued++
		if v.OldestQueued.IsZero() || t.CreatedAt.Before(v.OldestQueued) {
			v.OldestQueued = t.CreatedAt
		}
	}
	return v
}
