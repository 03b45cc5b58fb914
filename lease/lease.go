package lease

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"time"
)

// Errors callers branch on. Providers wrap them with the task or run id, so
// compare with errors.Is.
var (
	// ErrNoWork: no eligible task could be claimed. Not a failure.
	ErrNoWork = errors.New("nothing to claim")
	// ErrLeaseLost: the run is no longer live (expired, reaped, settled
	// with another outcome, or cancelled); the write changed nothing.
	ErrLeaseLost = errors.New("lease lost")
	// ErrNotFound: no task, run or lane with that id or name.
	ErrNotFound = errors.New("not found")
	// ErrConflict: the task is in a state that does not allow the request
	// (retry of a queued task, cancel of a finished one).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request itself is malformed (bad lane name, payload
	// that is not JSON or too large, non-positive lease).
	ErrInvalid = errors.New("invalid request")
	// ErrUnreachable: the backend could not be reached (refused, cut,
	// timed out, shutting down); the call may succeed once it answers
	// again.
	ErrUnreachable = errors.New("database unreachable")
)

// TaskState is the state of a task.
type TaskState string

// Task states.
const (
	TaskQueued    TaskState = "queued"
	TaskRunning   TaskState = "running"
	TaskDone      TaskState = "done"
	TaskFailed    TaskState = "failed"
	TaskCancelled TaskState = "cancelled"
)

// Finished reports whether the task has reached a final state.
func (s TaskState) Finished() bool {
	return s == TaskDone || s == TaskFailed || s == TaskCancelled
}

// RunState is the state (outcome) of a run.
type RunState string

// Run states.
const (
	RunRunning   RunState = "running"
	RunCompleted RunState = "completed"
	RunFailed    RunState = "failed"
	RunAbandoned RunState = "abandoned"
	RunCancelled RunState = "cancelled"
)

// Limits and defaults shared by every provider.
const (
	// MaxPayloadBytes caps the JSON text of a payload.
	MaxPayloadBytes = 1 << 20
	// DefaultMaxAttempts applies when an enqueue leaves MaxAttempts at 0.
	DefaultMaxAttempts = 3
	// DefaultLease applies when a claim or heartbeat leaves Lease at 0.
	DefaultLease = 5 * time.Minute
	// DefaultBackoffBase is the first retry delay after a failed attempt.
	DefaultBackoffBase = 10 * time.Second
	// MaxBackoff caps the retry delay.
	MaxBackoff = time.Hour
	// DefaultLane is used by an enqueue that names no lane.
	DefaultLane = "default"
	// DefaultKillGrace is how long a child stopped with SIGTERM has before
	// SIGKILL, when its agent sets no kill_grace.
	DefaultKillGrace = 10 * time.Second
)

// DefaultHeartbeat is how often a lease is renewed when nothing says: a
// third of it, so that two heartbeats in a row may fail before it ends.
func DefaultHeartbeat(lease time.Duration) time.Duration { return lease / 3 }

var lanePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// LanePattern is the documented pattern for lane and agent names.
const LanePattern = `^[a-z0-9][a-z0-9._-]{0,62}$`

// ValidName reports whether s may name a lane or an agent.
func ValidName(s string) bool { return lanePattern.MatchString(s) }

// Lane is a named stream of work with a concurrency limit.
type Lane struct {
	Name       string
	MaxRunning int
	Paused     bool
	// SetBy says who set the limit or the pause last (LaneUpdate.SetBy);
	// empty while the lane has its defaults.
	SetBy string
	// Filled by listings.
	Running      int
	Queued       int
	OldestQueued time.Time // zero when nothing is queued
}

// Task is one work item.
type Task struct {
	ID              int64
	Lane            string
	Agent           string
	Payload         json.RawMessage // byte-exact as enqueued
	Priority        int
	RunAfter        time.Time
	Attempts        int
	MaxAttempts     int
	State           TaskState
	DedupeKey       string
	ParentRun       int64 // the run that enqueued it; 0 when none
	CancelRequested bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
	FinishedAt      time.Time // zero until finished
	// LastSummary is the summary of the task's latest run, "" before one
	// ended: why a failed task failed; for a task its chain cancelled,
	// why (WaitReason).
	LastSummary string
	// After lists the tasks it waits for (or waited for), by id; AfterAny
	// says it waits for them to finish however they end.
	After    []int64
	AfterAny bool
	// Result is the result of the run that completed the task, nil when
	// none stored one. Filled by Task; listings leave it nil.
	Result json.RawMessage
	// Deferrals counts the runs of the task that deferred it (try later
	// without losing an attempt: Settlement.Deferred).
	Deferrals int
}

// Run is one attempt at a task.
type Run struct {
	ID              int64
	TaskID          int64
	Lane            string
	Agent           string
	Attempt         int
	Owner           string
	Instance        string
	State           RunState
	PID             int
	StartedAt       time.Time
	LastHeartbeatAt time.Time
	LeaseExpiresAt  time.Time
	LastOutputAt    time.Time // zero when unknown
	FinishedAt      time.Time // zero while running
	ExitCode        *int
	Signal          string
	Summary         string
	OutputTail      string
	// LogError says why the run's log file lacks output (a full disk), empty
	// when the file holds all of it; OutputTail is then the best record.
	LogError string
	// CPUTime and MemoryPeak are the settlement's: nil when not measured.
	CPUTime         *time.Duration
	MemoryPeak      *int64
	CancelRequested bool
	// Deferred says the run deferred its task: abandoned with its attempt
	// refunded, its task queued again for later (Settlement.Deferred).
	Deferred bool
	// Usage is what the run reported it spent (Provider.RecordUsage),
	// nil when it reported nothing; UsageNote its last note.
	Usage     *float64
	UsageNote string
	// Computed by the provider from its clock at read time, for live runs.
	SilentSeconds float64
	LeaseLeft     time.Duration
}

// Lease is what a successful claim hands out.
type Lease struct {
	TaskID         int64
	RunID          int64
	Lane           string
	Agent          string
	Attempt        int
	MaxAttempts    int
	Priority       int
	Payload        json.RawMessage
	LeaseExpiresAt time.Time
	Owner          string
	// ClaimToken is the token of the claim that made the run. Heartbeats
	// and settlements that carry it are fenced on it as well as on the run
	// id, so that a database that lost the run and gave its id to another
	// (a failover to a copy behind) never takes them for that other run's.
	ClaimToken string
	// RunAfter is when the task became claimable, by the provider's clock:
	// the start of its wait in the queue.
	RunAfter time.Time
	// Waited says the task waited for others (EnqueueParams.After): only
	// then are there parents' results to read before it starts.
	Waited bool
}

// EnqueueParams describes a new task.
type EnqueueParams struct {
	Lane        string // DefaultLane when empty
	Agent       string
	Payload     json.RawMessage // "{}" when empty
	Priority    int             // lower runs first
	RunAfter    time.Time       // zero: now
	Delay       time.Duration   // added to the provider's clock when RunAfter is zero
	MaxAttempts int             // DefaultMaxAttempts when zero
	DedupeKey   string
	// ParentRun is the run whose agent enqueued the task (through its
	// daemon), 0 when none did.
	ParentRun int64
	// After names existing tasks this one waits for (see Chains): at most
	// MaxAfter; AfterAny waits for them to finish however they end.
	After    []int64
	AfterAny bool
}

// ClaimParams selects what a claim may take and who holds it.
type ClaimParams struct {
	Lanes    []string // empty: any lane
	Agent    string   // empty: any agent
	Owner    string
	Instance string        // identifies one process of Owner
	Lease    time.Duration // DefaultLease when zero
	// Token names the claim, so that it can be asked again when its
	// outcome is unknown (see Provider.ClaimMany). Empty: the provider
	// makes one for each call. At most MaxTokenBytes printable ASCII.
	Token string
	// Limits are the rate limits each run of the claim takes one unit
	// of, in the claim's transaction. A claim held back by one of them
	// claims nothing and returns a *HeldError; ErrNotFound for a limit
	// that does not exist.
	Limits []string
	// Budget, when set, is the budget of the agent whose tasks the claim
	// takes: when its period's usage has reached its max, the claim
	// claims nothing and returns a *HeldError naming it ("budget NAME").
	Budget string
}

// MaxTokenBytes caps ClaimParams.Token.
const MaxTokenBytes = 64

// Beat is one heartbeat request.
type Beat struct {
	RunID int64
	// ClaimToken is the run's Lease.ClaimToken; empty: not checked.
	ClaimToken   string
	Lease        time.Duration // DefaultLease when zero
	PID          int           // recorded when non-zero
	LastOutputAt time.Time     // recorded when non-zero
}

// BeatResult answers one heartbeat.
type BeatResult struct {
	RunID           int64
	LeaseExpiresAt  time.Time
	CancelRequested bool
	Err             error // ErrLeaseLost when the run is no longer live
}

// Settlement ends a run.
type Settlement struct {
	RunID int64
	// ClaimToken is the run's Lease.ClaimToken; empty: not checked.
	ClaimToken string
	Outcome    RunState // RunCompleted, RunFailed, RunAbandoned or RunCancelled
	Summary    string
	// ExitCode and Signal record how a child ended, when one did.
	ExitCode   *int
	Signal     string
	OutputTail string
	// RetryIn delays the next attempt after RunFailed (zero: the
	// exponential backoff of Backoff with DefaultBackoffBase), and after
	// RunAbandoned when set (zero: claimable at once): a run that the
	// agent's own behaviour ended (timed out, stalled, died of a signal)
	// backs off like a failure; one that qd ended for its own reasons does
	// not.
	RetryIn time.Duration
	// Refund gives back the attempt of an abandoned run (graceful shutdown),
	// so it does not count toward MaxAttempts.
	Refund bool
	// LogError, when set, marks the run's log file incomplete and says why.
	LogError string
	// CPUTime and MemoryPeak are what the run's cgroup measured (the CPU
	// time of all its processes, their memory peak in bytes); nil when the
	// run had no cgroup or the cgroup no memory controller.
	CPUTime    *time.Duration
	MemoryPeak *int64
	// Event, when set (EventTimeout or EventStall), is recorded for the
	// run in the settlement's transaction, for TakeEvents, once the run
	// has this settlement's outcome.
	Event string
	// Result is what the run found, JSON (CheckResult), kept with a
	// completion and ignored with any other outcome.
	Result json.RawMessage
	// Deferred defers the task (the child was told "try later"): with
	// Outcome RunAbandoned, Refund and RetryIn, the run is marked
	// deferred and the task's deferrals counted, unless the task has
	// MaxDeferrals already; then the run fails instead, as a failed exit
	// would (backoff, and the attempt counted).
	Deferred     bool
	MaxDeferrals int
}

// DefaultMaxDeferrals caps the deferrals of a task when the agent sets no
// max_deferrals.
const DefaultMaxDeferrals = 100

// Deferral is the settlement of run l deferred for d: abandoned, its
// attempt refunded, its task queued again after d, at most max times.
func Deferral(l *Lease, d time.Duration, max int, summary string) Settlement {
	return Settlement{RunID: l.RunID, ClaimToken: l.ClaimToken, Outcome: RunAbandoned, Refund: true, RetryIn: d,
		Deferred: true, MaxDeferrals: max, Summary: summary}
}

// DeferralCapped is the summary a capped deferral's failed run ends
// with, after its own.
func DeferralCapped(max int) string {
	return fmt.Sprintf("; deferred %d times already, the most max_deferrals allows: failed instead", max)
}

// LaneUpdate changes a lane, creating it when missing. Nil fields stay.
type LaneUpdate struct {
	Name       string
	MaxRunning *int
	Paused     *bool
	// SetBy records who makes the change, such as "qd lane set" or a
	// daemon's config; empty leaves the record as it was.
	SetBy string
}

// TaskFilter narrows a task listing. Zero fields match everything.
type TaskFilter struct {
	Lane  string
	Agent string
	State TaskState
	Limit int
}

// RunFilter narrows a run listing. Zero fields match everything.
type RunFilter struct {
	TaskID int64
	Lane   string
	Agent  string
	State  RunState
	Owner  string
	// StartedAfter keeps the runs started after it; zero keeps all.
	StartedAfter time.Time
	// AfterID keeps the runs with a larger id (the ones started since a
	// listing that ended at AfterID).
	AfterID int64
	Limit   int
}

// PruneResult says what a prune removed (or would remove).
type PruneResult struct {
	Tasks  int64
	Runs   int64
	RunIDs []int64
}

// Provider is a queue backend. Every method is safe for concurrent use by
// many goroutines and processes.
type Provider interface {
	Chains

	// Enqueue adds a task and returns its id. When DedupeKey equals that of
	// a task not yet finished, it returns that task's id and existed=true
	// and writes nothing. Returns ErrInvalid for a bad lane, agent or payload.
	Enqueue(ctx context.Context, p EnqueueParams) (id int64, existed bool, err error)

	// Claim takes the best eligible task in one atomic transaction: reap
	// the expired leases of the lanes it covers, respect lane limits and
	// pauses, bump the attempt counter and insert the run. Returns
	// ErrNoWork when nothing is eligible. The token rule of ClaimMany
	// applies.
	Claim(ctx context.Context, p ClaimParams) (*Lease, error)

	// ClaimMany claims up to n tasks in one transaction, never taking a
	// lane past its limit. Returns an empty slice and nil when nothing is
	// eligible.
	//
	// Every run a claim makes records the claim's token. A claim whose
	// token already made runs claims nothing: it returns those of the runs
	// that are still live and held by p.Owner (none when all have ended),
	// with their attempts counted once. So a client that cannot tell
	// whether a claim committed (its connection died around COMMIT) asks
	// again with the same token rather than spend a second attempt. A
	// provider that still cannot learn the outcome by the lease's local
	// deadline returns an error, gives the token's runs back (abandoned,
	// attempt refunded) once it can, and its caller never starts them.
	ClaimMany(ctx context.Context, p ClaimParams, n int) ([]*Lease, error)

	// Heartbeat extends the leases of live runs. Each result carries its
	// own ErrLeaseLost; the error return is for the call as a whole.
	Heartbeat(ctx context.Context, beats ...Beat) ([]BeatResult, error)

	// Settle ends runs. Each is fenced on its own: a run that is no longer
	// live gets ErrLeaseLost, unless it already has the same outcome, in
	// which case settling again succeeds and changes nothing.
	Settle(ctx context.Context, s ...Settlement) ([]error, error)

	// Cancel cancels a queued task at once, or marks a running one so its
	// holder stops it. Returns the task's state after the call; ErrConflict
	// when it is already done or failed; ErrNotFound for an unknown id.
	Cancel(ctx context.Context, taskID int64) (TaskState, error)

	// RecordEvent records that run runID met event (one only its daemon
	// saw, as EventLeaseLost), unless it is recorded already: the outbox
	// TakeEvents reads. A task that fails for good records its EventFailed
	// itself, in the transaction that fails it, and a settlement its Event.
	// ErrNotFound for an unknown run, ErrInvalid for an unknown event.
	RecordEvent(ctx context.Context, runID int64, event string) error
	// TakeEvents turns up to limit events not yet taken whose agent and
	// event one of routes names into notifications, one per route and
	// target (none twice for a run, event and target), and marks those
	// events taken by by; it skips events another caller is taking. It
	// returns how many notifications it made.
	TakeEvents(ctx context.Context, by string, routes []NotifyRoute, limit int) (int, error)
	// ClaimNotifications claims for sending by c.By, until c.Lease has
	// passed, up to N due notifications of each target of c (pending ones
	// whose time has come, or sending ones whose claim expired), oldest
	// first, counting a try of each; a notification is claimed by one
	// caller at a time. In the same transaction it fails for good, and
	// returns as such, the pending notifications of those targets older
	// than c.GiveUp.
	ClaimNotifications(ctx context.Context, c NotifyClaim) (claimed, gaveUp []NotificationJob, err error)
	// FinishNotification records how try of notification id went: sent,
	// failed for good, or pending again after r.RetryIn. ErrLeaseLost when
	// that try no longer holds the notification (its claim expired and
	// another caller claimed it): nothing is written.
	FinishNotification(ctx context.Context, id int64, try int, r NotifyResult) error
	// Notifications lists the notifications about a task's runs, oldest
	// first.
	Notifications(ctx context.Context, taskID int64) ([]Notification, error)

	// CancelRequested returns those of runIDs that are live and whose task
	// has a cancel request: one cheap read, for a daemon that polls for
	// cancels between heartbeats.
	CancelRequested(ctx context.Context, runIDs []int64) ([]int64, error)

	// Retry queues a failed or cancelled task again with fresh attempts.
	// ErrConflict for any other state.
	Retry(ctx context.Context, taskID int64) error

	// AbandonOwner abandons at once the running runs of owner held by one
	// of instances: earlier incarnations of a daemon that it proved gone.
	// It never touches a run of any other instance, live or not. Returns
	// the runs abandoned; ErrInvalid for an empty owner.
	AbandonOwner(ctx context.Context, owner string, instances []string, summary string) ([]int64, error)

	// SetLane creates or changes a lane. ErrInvalid for a bad name or limit.
	SetLane(ctx context.Context, u LaneUpdate) (Lane, error)
	// Lanes lists every lane with its running and queued counts.
	Lanes(ctx context.Context) ([]Lane, error)

	// PauseAgent stops every claim of the agent's tasks until ResumeAgent;
	// pausing a paused agent keeps its first record. ResumeAgent of an
	// agent that is not paused does nothing. ErrInvalid for a bad name.
	PauseAgent(ctx context.Context, agent, setBy string) (AgentPause, error)
	ResumeAgent(ctx context.Context, agent string) error
	// PausedAgents lists the paused agents by name.
	PausedAgents(ctx context.Context) ([]AgentPause, error)

	Task(ctx context.Context, id int64) (Task, error)
	Run(ctx context.Context, id int64) (Run, error)
	Tasks(ctx context.Context, f TaskFilter) ([]Task, error)
	// Runs lists runs newest first; with TaskID set, in attempt order.
	Runs(ctx context.Context, f RunFilter) ([]Run, error)

	// Prune deletes finished tasks (and their runs) that finished more than
	// olderThan ago. With dryRun it only counts.
	Prune(ctx context.Context, olderThan time.Duration, dryRun bool) (PruneResult, error)

	// PeriodicTick records that the periodic schedule name fired at tick
	// and enqueues p, exactly once per tick across all callers. It returns
	// false when the tick (or a later one) was already recorded.
	PeriodicTick(ctx context.Context, name string, tick time.Time, p EnqueueParams) (bool, error)
	// PeriodicLast returns the last recorded tick of name (zero if none).
	PeriodicLast(ctx context.Context, name string) (time.Time, error)

	// SetLimit creates or changes a rate limit, at once for every
	// claimer. ErrInvalid for a bad name, rate or burst.
	SetLimit(ctx context.Context, u LimitUpdate) (Limit, error)
	// Limits lists every rate limit with its units now, by name.
	Limits(ctx context.Context) ([]Limit, error)
	// Spend takes units from limit name after the fact (a run's tokens,
	// say): the limit may go into debt, which holds later claims back
	// until it is paid. ErrNotFound for an unknown limit.
	Spend(ctx context.Context, name string, units int64) (Limit, error)

	// SetBudget creates or changes a budget, at once for every claimer.
	// ErrInvalid for a bad name, max, period or time zone, or a new
	// budget without max and period.
	SetBudget(ctx context.Context, u BudgetUpdate) (Budget, error)
	// Budgets lists every budget with its current period's usage.
	Budgets(ctx context.Context) ([]Budget, error)
	// RecordUsage adds u.Amount to run u.RunID's usage and, with
	// u.Budget, to that budget's current period. When the period's usage
	// reaches the budget's max for the first time in the period, it
	// records the run's EventBudgetExhausted, once per period however
	// many callers race. ErrNotFound for an unknown run or budget.
	RecordUsage(ctx context.Context, u Usage) (Budget, error)

	// Ping checks that the backend answers.
	Ping(ctx context.Context) error
	Close()
}

// Backoff returns the delay before attempt+1 after attempt failed: base
// doubled per attempt, capped at MaxBackoff, with ±20% jitter.
func Backoff(base time.Duration, attempt int) time.Duration {
	if base <= 0 {
		base = DefaultBackoffBase
	}
	d := base
	for i := 1; i < attempt && d < MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, MaxBackoff)
	jitter := time.Duration(rand.Int64N(int64(d)/5*2+1)) - d/5
	return d + jitter
}

// ValidateEnqueue checks p and fills its defaults. Providers call it first.
func ValidateEnqueue(p *EnqueueParams) error {
	if p.Lane == "" {
		p.Lane = DefaultLane
	}
	if !ValidName(p.Lane) {
		return fmt.Errorf("%w: lane %q does not match %s", ErrInvalid, p.Lane, LanePattern)
	}
	if !ValidName(p.Agent) {
		return fmt.Errorf("%w: agent %q does not match %s", ErrInvalid, p.Agent, LanePattern)
	}
	if len(p.Payload) == 0 {
		p.Payload = json.RawMessage("{}")
	}
	if err := CheckPayload(p.Payload); err != nil {
		return err
	}
	after, err := CheckAfter(p.After)
	if err != nil {
		return err
	}
	p.After = after
	if p.MaxAttempts == 0 {
		p.MaxAttempts = DefaultMaxAttempts
	}
	if p.MaxAttempts < 0 {
		return fmt.Errorf("%w: max attempts %d is negative", ErrInvalid, p.MaxAttempts)
	}
	if p.Delay < 0 {
		return fmt.Errorf("%w: delay %s is negative", ErrInvalid, p.Delay)
	}
	for _, err := range []error{CheckPriority(p.Priority), CheckMaxAttempts(p.MaxAttempts),
		CheckDedupeKey(p.DedupeKey)} {
		if err != nil {
			return err
		}
	}
	return nil
}

// ValidateClaim checks p and fills its defaults.
func ValidateClaim(p *ClaimParams) error {
	if p.Lease == 0 {
		p.Lease = DefaultLease
	}
	if p.Lease < 0 {
		return fmt.Errorf("%w: lease %s is negative", ErrInvalid, p.Lease)
	}
	for _, l := range p.Lanes {
		if !ValidName(l) {
			return fmt.Errorf("%w: lane %q does not match %s", ErrInvalid, l, LanePattern)
		}
	}
	if p.Agent != "" && !ValidName(p.Agent) {
		return fmt.Errorf("%w: agent %q does not match %s", ErrInvalid, p.Agent, LanePattern)
	}
	if p.Owner == "" {
		return fmt.Errorf("%w: claim needs an owner", ErrInvalid)
	}
	for _, l := range p.Limits {
		if !ValidName(l) {
			return fmt.Errorf("%w: limit %q does not match %s", ErrInvalid, l, LanePattern)
		}
	}
	if p.Budget != "" && !ValidName(p.Budget) {
		return fmt.Errorf("%w: budget %q does not match %s", ErrInvalid, p.Budget, LanePattern)
	}
	if len(p.Limits) > 1 {
		p.Limits = slices.Compact(slices.Sorted(slices.Values(p.Limits)))
	}
	if len(p.Token) > MaxTokenBytes {
		return fmt.Errorf("%w: claim token is %d bytes, more than %d", ErrInvalid, len(p.Token), MaxTokenBytes)
	}
	for _, c := range []byte(p.Token) {
		if c < '!' || c > '~' {
			return fmt.Errorf("%w: claim token %q holds a byte that is not printable ASCII", ErrInvalid, p.Token)
		}
	}
	return nil
}

// NewClaimToken returns a random claim token: 16 bytes in hex.
func NewClaimToken() string {
	var b [16]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("read random claim token: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// ValidateSettlement checks that s names a settling outcome.
func ValidateSettlement(s Settlement) error {
	switch s.Outcome {
	case RunCompleted, RunFailed, RunAbandoned, RunCancelled:
	default:
		return fmt.Errorf("%w: run %d: outcome %q cannot settle a run", ErrInvalid, s.RunID, s.Outcome)
	}
	if s.RetryIn < 0 {
		return fmt.Errorf("%w: run %d: retry delay %s is negative", ErrInvalid, s.RunID, s.RetryIn)
	}
	if s.Deferred && (s.Outcome != RunAbandoned || !s.Refund || s.MaxDeferrals < 1) {
		return fmt.Errorf("%w: run %d: a deferral is abandoned with its attempt refunded and a max_deferrals from 1", ErrInvalid, s.RunID)
	}
	if s.Event != "" && (s.Event == EventFailed || !ValidEvent(s.Event)) {
		return fmt.Errorf("%w: run %d: event %q is not one a settlement records", ErrInvalid, s.RunID, s.Event)
	}
	if s.Result != nil {
		if err := CheckResult(s.Result); err != nil {
			return fmt.Errorf("run %d: %w", s.RunID, err)
		}
	}
	return nil
}

// GiveBack is the settlement of a run of l given back unstarted: abandoned,
// its attempt refunded, its task claimable again at once. summary says
// why, starting "given back unstarted: ". Every give-back is this one:
// a claim answered too late or during a shutdown, an agent a reload
// removed, a start the daemon could not make, a claim whose outcome was
// unknown.
func GiveBack(l *Lease, summary string) Settlement {
	return Settlement{RunID: l.RunID, ClaimToken: l.ClaimToken, Outcome: RunAbandoned, Refund: true, Summary: summary}
}

// SilenceSummary is the summary the reaper writes on an expired run.
func SilenceSummary(silent time.Duration) string {
	return fmt.Sprintf("lease expired: silent for %ds", int64(silent.Round(time.Second)/time.Second))
}
