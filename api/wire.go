package api

import (
	"errors"
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
)

// ProgressPath is the path a child posts to for run id.
func ProgressPath(runID int64) string {
	return "/v1/runs/" + strconv.FormatInt(runID, 10) + "/progress"
}

// ErrUnknownRun: the daemon does not run the run named in a request (it
// ended, or another daemon holds it). The server answers 404 Not Found, and
// the client's error matches it again.
var ErrUnknownRun = errors.New("the daemon is not running this run")
