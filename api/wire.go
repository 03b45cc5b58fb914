package api

import (
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"time"
)

// The endpoints' paths. Every request goes to the host "qd" over the unix
// socket: curl --unix-socket SOCKET http://qd/v1/status.
const (
	// StatusPath answers GET with a Snapshot.
	StatusPath = "/v1/status"
	// progressPattern takes POST with no body: the child of run {id} made
	// progress (see ProgressPath).
	progressPattern = "/v1/runs/{id}/progress"
	// cancelPattern takes POST with no body: cancel task {id} in the
	// database and stop its run now, if this daemon runs it; answers a
	// Cancelled.
	cancelPattern = "/v1/tasks/{id}/cancel"
	// wakePattern takes POST with no body: claim for agent {name} now.
	wakePattern = "/v1/agents/{name}/wake"
	// TasksPath takes POST with an EnqueueRequest: add a task to the
	// daemon's queue; answers an Enqueued.
	TasksPath = "/v1/tasks"
	// deferPattern takes POST with a DeferRequest: should the child of run
	// {id} exit 75, its task is tried again after that delay (see
	// DeferPath).
	deferPattern = "/v1/runs/{id}/defer"
	// usagePattern takes POST with a UsageRequest: the child of run {id}
	// spent that much (see UsagePath); answers a UsageReported.
	usagePattern = "/v1/runs/{id}/usage"
	// spendPattern takes POST with a SpendRequest: take units of limit
	// {name} after the fact; answers the Limit (see SpendPath).
	spendPattern = "/v1/limits/{name}/spend"
	// MetricsPath answers GET with the daemon's Prometheus metrics in the
	// text format (docs/metrics.md).
	MetricsPath = "/v1/metrics"
	// resultPattern takes POST with a JSON body: the result of run {id},
	// stored with its completion (see ResultPath).
	resultPattern = "/v1/runs/{id}/result"
	// parentsPattern answers GET with the results of the tasks run {id}'s
	// task waited for: one JSON object keyed by task id (see ParentsPath).
	parentsPattern = "/v1/runs/{id}/parents"
)

// ResultPath is the path a child posts its result to for run id.
func ResultPath(runID int64) string {
	return "/v1/runs/" + strconv.FormatInt(runID, 10) + "/result"
}

// ParentsPath is the path a child reads its parents' results from.
func ParentsPath(runID int64) string {
	return "/v1/runs/" + strconv.FormatInt(runID, 10) + "/parents"
}

// EnqueueRequest is a task to add to the daemon's own queue: what an agent
// sends for a follow-up task, since it never holds the database URL.
type EnqueueRequest struct {
	Lane         string          `json:"lane"`
	Agent        string          `json:"agent"`
	Payload      json.RawMessage `json:"payload"` // JSON; {} when empty
	Priority     int             `json:"priority,omitempty"`
	RunAfter     time.Time       `json:"run_after,omitzero"`
	DelaySeconds float64         `json:"delay_seconds,omitempty"`
	MaxAttempts  int             `json:"max_attempts,omitempty"`
	DedupeKey    string          `json:"dedupe_key,omitempty"`
	// After names tasks the new one waits for (lease.Chains); AfterAny
	// waits for them to finish however they end.
	After    []int64 `json:"after,omitempty"`
	AfterAny bool    `json:"after_any,omitempty"`
	// Wake claims for the agent at once, when the daemon runs it.
	Wake bool `json:"wake,omitempty"`
}

// Enqueued answers an EnqueueRequest. ParentRun is the run that sent it,
// proved by its token or by the sender's process group or cgroup (0 for
// the operator: a sender that is none of the daemon's runs); Woken says whether the daemon claims for the
// agent at once (it runs it, and the request asked).
type Enqueued struct {
	TaskID    int64 `json:"task_id"`
	Existed   bool  `json:"existed"`
	ParentRun int64 `json:"parent_run,omitempty"`
	Woken     bool  `json:"woken"`
}

// ErrBadRequest: the request was refused as invalid (a bad lane, a payload
// that is not JSON); the server answers 400 and the message says why.
var ErrBadRequest = errors.New("invalid request")

// Cancelled answers a cancel, which the daemon has recorded in the
// database: the task's state after it ("cancelled" when it was queued,
// "running" while its run stops), and the run this daemon stopped, 0 when
// it runs no run of the task (another daemon may; it learns of the cancel
// from the database within about a second).
type Cancelled struct {
	TaskID int64  `json:"task_id"`
	State  string `json:"state"`
	RunID  int64  `json:"run_id"`
}

// ErrUnknownTask: there is no task of the id in a cancel. The server
// answers 404; the client's error matches it again.
var ErrUnknownTask = errors.New("no such task")

// ErrConflict: the task is in a state that does not allow the request (a
// cancel of a task already done or failed). The server answers 409; the
// client's error matches it again.
var ErrConflict = errors.New("conflict")

// ProgressPath is the path a child posts to for run id.
func ProgressPath(runID int64) string {
	return "/v1/runs/" + strconv.FormatInt(runID, 10) + "/progress"
}

// CancelPath is the path that cancels task id's run.
func CancelPath(taskID int64) string {
	return "/v1/tasks/" + strconv.FormatInt(taskID, 10) + "/cancel"
}

// WakePath is the path that wakes agent.
func WakePath(agent string) string { return "/v1/agents/" + url.PathEscape(agent) + "/wake" }

// DeferPath is the path a child posts a DeferRequest to for run id.
func DeferPath(runID int64) string { return "/v1/runs/" + strconv.FormatInt(runID, 10) + "/defer" }

// DeferRequest is how long a run's task should wait before it is tried
// again, once its child exits 75 (EX_TEMPFAIL): "retry after 30 s".
type DeferRequest struct {
	Seconds float64 `json:"seconds"`
}

// MaxDefer caps a deferral's delay.
const MaxDefer = 30 * 24 * time.Hour

// UsagePath is the path a child posts a UsageRequest to for run id.
func UsagePath(runID int64) string { return "/v1/runs/" + strconv.FormatInt(runID, 10) + "/usage" }

// UsageRequest is what a run spent, in the unit its budget counts
// (dollars, tokens), with an optional note ("1,520 tokens").
type UsageRequest struct {
	Amount float64 `json:"amount"`
	Note   string  `json:"note,omitempty"`
}

// UsageReported answers a UsageRequest: the run, and its agent's budget
// after the report (null when the agent has none).
type UsageReported struct {
	RunID  int64   `json:"run_id"`
	Budget *Budget `json:"budget"`
}

// SpendPath is the path a run posts a SpendRequest to for limit name.
func SpendPath(name string) string { return "/v1/limits/" + url.PathEscape(name) + "/spend" }

// SpendRequest is what a run spent of a limit after its claim's unit: the
// tokens of a language model's answer, say.
type SpendRequest struct {
	Units int64 `json:"units"`
}

// ErrUnknownLimit: no limit of the name in a spend. The server answers
// 404; the client's error matches it again.
var ErrUnknownLimit = errors.New("no such limit")

// ErrUnknownAgent: the daemon runs no agent of the name in a wake. The
// server answers 404 with the agents it runs; the client's error matches
// it again.
var ErrUnknownAgent = errors.New("the daemon runs no such agent")

// ErrUnknownRun: the daemon does not run the run named in a request (it
// ended, or another daemon holds it). The server answers 404 Not Found, and
// the client's error matches it again.
var ErrUnknownRun = errors.New("the daemon is not running this run")
