package api

import (
	"encoding/json"
	"time"

	"github.com/qd-run/qd/lease"
)

// The facts qd prints: a task, a run, a run in flight, a lane, a claimed
// lease, how a run ended, a periodic schedule. Each has one wire type
// here, made by one converter from lease's types, and every JSON qd
// writes of it is that type: `qd ... --json`, the socket's Snapshot and
// the dashboard's /api/ twins alike, so a fact has the same fields
// wherever it is read.
//
// No field of these is ever left out. A time that has not happened (a
// running run's finished_at) and a number that is not known (the pid of a
// run a script claimed, the CPU time where runs have no cgroup) are null;
// a text that is not set is "". Times that always exist (when a task was
// created, when a run started) are plain times.

// When is t, or nil for the zero time: null in JSON.
func When(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// Task is one work item.
type Task struct {
	ID          int64           `json:"id"`
	Lane        string          `json:"lane"`
	Agent       string          `json:"agent"`
	State       lease.TaskState `json:"state"`
	Priority    int             `json:"priority"`
	Attempts    int             `json:"attempts"`
	MaxAttempts int             `json:"max_attempts"`
	RunAfter    time.Time       `json:"run_after"`
	DedupeKey   string          `json:"dedupe_key"`
	// ParentRun is the run that enqueued the task through its daemon.
	ParentRun *int64 `json:"parent_run"`
	// LastSummary is the summary of the task's latest run that ended.
	LastSummary     string          `json:"last_summary"`
	CancelRequested bool            `json:"cancel_requested"`
	CreatedAt       time.Time       `json:"created_at"`
	UpdatedAt       time.Time       `json:"updated_at"`
	FinishedAt      *time.Time      `json:"finished_at"`
	Payload         json.RawMessage `json:"payload"`
	// PayloadNote says why Payload is the stored text as a JSON string (a
	// payload past the limits, stored by other means: lease.ShowPayload).
	PayloadNote string `json:"payload_note"`
	// After lists the tasks it waits (or waited) for; AfterAny says it
	// waits for them to finish however they end.
	After    []int64 `json:"after"`
	AfterAny bool    `json:"after_any"`
	// Result is what the run that completed the task stored; null before,
	// without one, and in listings (read one task for it).
	Result json.RawMessage `json:"result"`
	// Deferrals counts the runs that deferred the task (exit 75).
	Deferrals int `json:"deferrals"`
}

// Link is a task at the other end of a dependency: one the task waits
// for, or one that waits for it.
type Link struct {
	ID      int64           `json:"id"`
	Lane    string          `json:"lane"`
	Agent   string          `json:"agent"`
	State   lease.TaskState `json:"state"`
	Summary string          `json:"summary"`
}

// LinkOf is l on the wire.
func LinkOf(l lease.Link) Link {
	return Link{ID: l.ID, Lane: l.Lane, Agent: l.Agent, State: l.State, Summary: l.Summary}
}

// TaskOf is t on the wire.
func TaskOf(t lease.Task) Task {
	payload, note := lease.ShowPayload(t.Payload)
	out := Task{
		ID: t.ID, Lane: t.Lane, Agent: t.Agent, State: t.State, Priority: t.Priority,
		Attempts: t.Attempts, MaxAttempts: t.MaxAttempts, RunAfter: t.RunAfter, DedupeKey: t.DedupeKey,
		LastSummary: t.LastSummary, CancelRequested: t.CancelRequested,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, FinishedAt: When(t.FinishedAt),
		Payload: payload, PayloadNote: note, After: t.After, AfterAny: t.AfterAny, Result: t.Result,
		Deferrals: t.Deferrals,
	}
	if out.After == nil {
		out.After = []int64{}
	}
	if t.ParentRun != 0 {
		out.ParentRun = &t.ParentRun
	}
	return out
}

// Run is one attempt at a task, as the queue records it.
type Run struct {
	ID              int64          `json:"id"`
	TaskID          int64          `json:"task_id"`
	Lane            string         `json:"lane"`
	Agent           string         `json:"agent"`
	Attempt         int            `json:"attempt"`
	Owner           string         `json:"owner"`
	State           lease.RunState `json:"state"`
	PID             *int           `json:"pid"`
	StartedAt       time.Time      `json:"started_at"`
	LastHeartbeatAt time.Time      `json:"last_heartbeat_at"`
	LeaseExpiresAt  time.Time      `json:"lease_expires_at"`
	FinishedAt      *time.Time     `json:"finished_at"`
	ExitCode        *int           `json:"exit_code"`
	Signal          string         `json:"signal"`
	Summary         string         `json:"summary"`
	// LogError says why the run's log file lacks output (a full disk).
	LogError        string `json:"log_error"`
	CancelRequested bool   `json:"cancel_requested"`
	// SilentSeconds and LeaseLeftSeconds are the queue's, by the database
	// clock when it was read, for a running run; null for the others.
	SilentSeconds    *float64 `json:"silent_seconds"`
	LeaseLeftSeconds *float64 `json:"lease_left_seconds"`
	// CPUSeconds and MemoryPeakBytes are what the run's cgroup measured
	// when it ended; null where it had none, or while it runs.
	CPUSeconds      *float64 `json:"cpu_seconds"`
	MemoryPeakBytes *int64   `json:"memory_peak_bytes"`
	// Deferred says the run deferred its task: it exited 75 and the task
	// was queued again for later, its attempt not counted.
	Deferred bool `json:"deferred"`
	// Usage is what the run reported it spent (qd usage), null when it
	// reported nothing; UsageNote the last note it gave.
	Usage     *float64 `json:"usage"`
	UsageNote string   `json:"usage_note"`
}

// RunOf is r on the wire.
func RunOf(r lease.Run) Run {
	out := Run{
		ID: r.ID, TaskID: r.TaskID, Lane: r.Lane, Agent: r.Agent, Attempt: r.Attempt,
		Owner: r.Owner, State: r.State, PID: known(r.PID), StartedAt: r.StartedAt,
		LastHeartbeatAt: r.LastHeartbeatAt, LeaseExpiresAt: r.LeaseExpiresAt,
		FinishedAt: When(r.FinishedAt), ExitCode: r.ExitCode, Signal: r.Signal,
		Summary: r.Summary, LogError: r.LogError, CancelRequested: r.CancelRequested,
		CPUSeconds: seconds(r.CPUTime), MemoryPeakBytes: r.MemoryPeak, Deferred: r.Deferred,
		Usage: r.Usage, UsageNote: r.UsageNote,
	}
	if r.State == lease.RunRunning {
		silent, left := r.SilentSeconds, r.LeaseLeft.Seconds()
		out.SilentSeconds, out.LeaseLeftSeconds = &silent, &left
	}
	return out
}

// LiveRun is a run in flight as its daemon sees it: the child's pid, the
// time since the last heartbeat answered and since the last output, the
// lease left and the CPU time so far. Its seconds are the daemon's own
// count on its monotonic clock, never a comparison of a host clock with a
// database timestamp; where no daemon can be asked (the dashboard, a
// daemon on another host) they are the queue's, by the database clock.
type LiveRun struct {
	RunID   int64  `json:"run_id"`
	TaskID  int64  `json:"task_id"`
	Lane    string `json:"lane"`
	Agent   string `json:"agent"`
	Attempt int    `json:"attempt"`
	// Owner is the daemon (or script) that holds the run's lease.
	Owner     string    `json:"owner"`
	PID       *int      `json:"pid"`
	StartedAt time.Time `json:"started_at"`
	// AgeSeconds is how long the run has been going.
	AgeSeconds float64 `json:"age_seconds"`
	// SilentSeconds is the time since the answer to the last heartbeat.
	SilentSeconds float64 `json:"silent_seconds"`
	// LastOutputAt is when the child last wrote to stdout or stderr; null
	// before it wrote anything.
	LastOutputAt *time.Time `json:"last_output_at"`
	// OutputSilentSeconds is the time since the child last wrote output,
	// or since it started when it has written nothing.
	OutputSilentSeconds float64 `json:"output_silent_seconds"`
	// LeaseExpiresAt is the end of the lease by the database's clock.
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// LeaseLeftSeconds is the time to the end of the lease; a daemon counts
	// it from when its last successful heartbeat was sent, so it is never
	// later than LeaseExpiresAt. 0 once it is over.
	LeaseLeftSeconds float64 `json:"lease_left_seconds"`
	// CPUSeconds is the CPU time the run's processes used so far, read
	// from the run's cgroup; null where runs have none or no daemon says.
	CPUSeconds *float64 `json:"cpu_seconds"`
}

// LiveRunOf is the running run r on the wire at now. A daemon hands over
// what its supervisor knows of its child in r: the pid, the start, the
// silence and lease left by its own clock, the last output, the CPU time
// so far (lease.Run's CPUTime); the dashboard hands over the queue's row.
func LiveRunOf(r lease.Run, now time.Time) LiveRun {
	quiet := r.StartedAt
	if !r.LastOutputAt.IsZero() {
		quiet = r.LastOutputAt
	}
	return LiveRun{
		RunID: r.ID, TaskID: r.TaskID, Lane: r.Lane, Agent: r.Agent, Attempt: r.Attempt,
		Owner: r.Owner, PID: known(r.PID), StartedAt: r.StartedAt, AgeSeconds: now.Sub(r.StartedAt).Seconds(),
		SilentSeconds: r.SilentSeconds, LastOutputAt: When(r.LastOutputAt), OutputSilentSeconds: now.Sub(quiet).Seconds(),
		LeaseExpiresAt: r.LeaseExpiresAt, LeaseLeftSeconds: max(r.LeaseLeft, 0).Seconds(), CPUSeconds: seconds(r.CPUTime),
	}
}

// LastOutcome is how a run ended: its outcome, its summary (for a failure,
// ending with the last line the agent wrote to stderr) and when.
type LastOutcome struct {
	RunID   int64          `json:"run_id"`
	TaskID  int64          `json:"task_id"`
	Outcome lease.RunState `json:"outcome"`
	Summary string         `json:"summary"`
	At      time.Time      `json:"at"`
}

// LastOutcomeOf is how the ended run r ended; a daemon hands over the
// settlement it made (its outcome as State, its end as FinishedAt).
func LastOutcomeOf(r lease.Run) LastOutcome {
	return LastOutcome{RunID: r.ID, TaskID: r.TaskID, Outcome: r.State, Summary: r.Summary, At: r.FinishedAt}
}

// Periodic is a periodic schedule of a daemon's config: when it fires
// next by that daemon's clock (null when it never will, or no daemon
// that has it says), and the last tick recorded in the queue by any
// daemon (null before the first).
type Periodic struct {
	Name     string     `json:"name"`
	Schedule string     `json:"schedule"`
	Agent    string     `json:"agent"`
	Lane     string     `json:"lane"`
	NextTick *time.Time `json:"next_tick"`
	LastTick *time.Time `json:"last_tick"`
}

// PeriodicOf is the schedule the queue recorded as r, without what only a
// daemon's config says (schedule, agent, lane, next tick).
func PeriodicOf(r lease.PeriodicRecord) Periodic {
	return Periodic{Name: r.Name, LastTick: When(r.LastTick)}
}

// Lane is a lane: its limit, whether it is paused and by whom, its live
// runs and queued tasks, and when the oldest of those was queued (null
// when none waits).
type Lane struct {
	Name           string     `json:"name"`
	MaxRunning     int        `json:"max_running"`
	Paused         bool       `json:"paused"`
	Running        int        `json:"running"`
	Queued         int        `json:"queued"`
	OldestQueuedAt *time.Time `json:"oldest_queued_at"`
	SetBy          string     `json:"set_by"`
}

// LaneOf is l on the wire.
func LaneOf(l lease.Lane) Lane {
	return Lane{Name: l.Name, MaxRunning: l.MaxRunning, Paused: l.Paused, Running: l.Running,
		Queued: l.Queued, OldestQueuedAt: When(l.OldestQueued), SetBy: l.SetBy}
}

// AgentPause is a paused agent (`qd agent pause`): when and by whom; none
// of its tasks is claimed until it is resumed.
type AgentPause struct {
	Agent    string    `json:"agent"`
	PausedAt time.Time `json:"paused_at"`
	SetBy    string    `json:"set_by"`
}

// AgentPauseOf is a on the wire.
func AgentPauseOf(a lease.AgentPause) AgentPause {
	return AgentPause{Agent: a.Agent, PausedAt: a.At, SetBy: a.SetBy}
}

// Limit is a rate limit (docs/limits.md): its rate as written
// ("60/1m"), its burst, the units it has now (negative when runs spent
// more than it had) and when the next is due (null when it is full), who
// set it last and the agents that use it.
type Limit struct {
	Name       string     `json:"name"`
	Rate       string     `json:"rate"`
	Burst      int        `json:"burst"`
	Available  int        `json:"available"`
	NextUnitAt *time.Time `json:"next_unit_at"`
	Agents     []string   `json:"agents"`
	SetBy      string     `json:"set_by"`
}

// LimitOf is l on the wire.
func LimitOf(l lease.Limit) Limit {
	agents := l.Agents
	if agents == nil {
		agents = []string{}
	}
	return Limit{Name: l.Name, Rate: lease.FormatRate(l.Rate, l.Per), Burst: l.Burst, Available: l.Available,
		NextUnitAt: When(l.NextUnitAt), Agents: agents, SetBy: l.SetBy}
}

// Budget is a budget (docs/limits.md) and its current period: what the
// period's runs reported (spent), when the period started and the next
// starts, and when it was spent (null while it is not).
type Budget struct {
	Name        string     `json:"name"`
	Max         float64    `json:"max"`
	Period      string     `json:"period"`
	Timezone    string     `json:"timezone"`
	Spent       float64    `json:"spent"`
	Exhausted   bool       `json:"exhausted"`
	PeriodStart time.Time  `json:"period_start"`
	PeriodEnd   time.Time  `json:"period_end"`
	ExhaustedAt *time.Time `json:"exhausted_at"`
	Agents      []string   `json:"agents"`
	SetBy       string     `json:"set_by"`
}

// BudgetOf is b on the wire.
func BudgetOf(b lease.Budget) Budget {
	agents := b.Agents
	if agents == nil {
		agents = []string{}
	}
	return Budget{Name: b.Name, Max: b.Max, Period: b.Period, Timezone: b.Timezone, Spent: b.Spent,
		Exhausted: b.Exhausted(), PeriodStart: b.PeriodStart, PeriodEnd: b.PeriodEnd, ExhaustedAt: When(b.ExhaustedAt),
		Agents: agents, SetBy: b.SetBy}
}

// Lease is what a claim hands out (`qd claim`): the run, its task's
// payload as enqueued, and when the lease ends unless renewed.
type Lease struct {
	TaskID         int64           `json:"task_id"`
	RunID          int64           `json:"run_id"`
	Lane           string          `json:"lane"`
	Agent          string          `json:"agent"`
	Attempt        int             `json:"attempt"`
	MaxAttempts    int             `json:"max_attempts"`
	Priority       int             `json:"priority"`
	Payload        json.RawMessage `json:"payload"`
	LeaseExpiresAt time.Time       `json:"lease_expires_at"`
	Owner          string          `json:"owner"`
}

// LeaseOf is l on the wire; its claim token stays out of it.
func LeaseOf(l lease.Lease) Lease {
	return Lease{TaskID: l.TaskID, RunID: l.RunID, Lane: l.Lane, Agent: l.Agent, Attempt: l.Attempt,
		MaxAttempts: l.MaxAttempts, Priority: l.Priority, Payload: l.Payload,
		LeaseExpiresAt: l.LeaseExpiresAt, Owner: l.Owner}
}

// known is n, or nil for 0: a pid not recorded.
func known(n int) *int {
	if n == 0 {
		return nil
	}
	return &n
}

// seconds is d in seconds, or nil when not measured.
func seconds(d *time.Duration) *float64 {
	if d == nil {
		return nil
	}
	s := d.Seconds()
	return &s
}
