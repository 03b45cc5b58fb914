package api

import (
	"errors"
	"net/url"
	"strconv"
)

// The endpoints' paths. Every request goes to the host "qd" over the unix
// socket: curl --unix-socket SOCKET http://qd/v1/status.
const (
	// StatusPath answers GET with a Snapshot.
	StatusPath = "/v1/status"
	// progressPattern takes POST with no body: the child of run {id} made
	// progress (see ProgressPath).
	progressPattern = "/v1/runs/{id}/progress"
	// cancelPattern takes POST with no body: stop the run of task {id} now,
	// if this daemon runs it; answers a Cancelled.
	cancelPattern = "/v1/tasks/{id}/cancel"
	// wakePattern takes POST with no body: claim for agent {name} now.
	wakePattern = "/v1/agents/{name}/wake"
)

// Cancelled answers a cancel: the run this daemon stopped, 0 when it runs
// no run of the task (another daemon may; it learns of the cancel from the
// database within about a second).
type Cancelled struct {
	TaskID int64 `json:"task_id"`
	RunID  int64 `json:"run_id"`
}

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

// ErrUnknownAgent: the daemon runs no agent of the name in a wake. The
// server answers 404 with the agents it runs; the client's error matches
// it again.
var ErrUnknownAgent = errors.New("the daemon runs no such agent")

// ErrUnknownRun: the daemon does not run the run named in a request (it
// ended, or another daemon holds it). The server answers 404 Not Found, and
// the client's error matches it again.
var ErrUnknownRun = errors.New("the daemon is not running this run")
