package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotRunning is matched (errors.Is) by a Client's error when nothing
// listens on the socket.
var ErrNotRunning = errors.New("qd daemon is not running")

// maxResponseBytes caps what a Client reads, far above any real snapshot.
const maxResponseBytes = 16 << 20

// NotRunningError says no daemon answers at Path; Err is the connect error.
type NotRunningError struct {
	Path string
	Err  error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("no qd daemon is answering at %s (connect: %v); is `qd run` running?", e.Path, e.Err)
}

func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }
func (e *NotRunningError) Unwrap() error        { return e.Err }

// Client talks to the daemon listening at the unix socket Path. It is the
// only client of the API in qd: `qd status`, and children (`qd heartbeat`
// with QD_SOCKET set) use it. The zero value with a Path is ready to use;
// it keeps no connection between calls.
type Client struct {
	Path string
	// Token, when set, is sent with every request (TokenHeader): a run's
	// QD_RUN_TOKEN, which proves to the daemon that the caller is that
	// run. Empty for the operator.
	Token string
}

// Status asks the daemon for its Snapshot, with every live run.
func (c Client) Status(ctx context.Context) (*Snapshot, error) {
	return c.StatusRuns(ctx, -1)
}

// StatusRuns asks the daemon for its Snapshot with its runs oldest live
// runs listed (every one when runs < 0); RunsTotal counts them all.
func (c Client) StatusRuns(ctx context.Context, runs int) (*Snapshot, error) {
	path := StatusPath
	if runs >= 0 {
		path += "?runs=" + strconv.Itoa(runs)
	}
	var snap Snapshot
	if err := c.do(ctx, http.MethodGet, path, &snap); err != nil {
		return nil, err
	}
	return &snap, nil
}

// Progress tells the daemon that the child of run id made progress. The
// error matches ErrUnknownRun when the daemon does not run it.
func (c Client) Progress(ctx context.Context, runID int64) error {
	err := c.do(ctx, http.MethodPost, ProgressPath(runID), nil)
	if err == nil || errors.Is(err, ErrNotRunning) {
		return err
	}
	return fmt.Errorf("report progress of run %d: %w", runID, err)
}

// CancelTask asks the daemon to cancel task id: it records the request in
// the database and stops the task's run now, if it runs it (the answer's
// RunID is 0 when it does not). The error matches ErrUnknownTask,
// ErrConflict (the task is done or failed) or ErrRefused (a run may cancel
// only its own task and those it enqueued).
func (c Client) CancelTask(ctx context.Context, taskID int64) (Cancelled, error) {
	var out Cancelled
	err := c.do(ctx, http.MethodPost, CancelPath(taskID), &out)
	if err == nil || errors.Is(err, ErrNotRunning) {
		return out, err
	}
	return out, fmt.Errorf("cancel task %d: %w", taskID, err)
}

// Wake asks the daemon to claim for agent now. The error matches
// ErrUnknownAgent (and says which agents it runs) when it runs no such
// agent.
func (c Client) Wake(ctx context.Context, agent string) error {
	err := c.do(ctx, http.MethodPost, WakePath(agent), nil)
	if err == nil || errors.Is(err, ErrNotRunning) {
		return err
	}
	return fmt.Errorf("wake agent %s: %w", agent, err)
}

// Defer asks the daemon that, should the child of run id exit 75, its
// task be tried again after d. The error matches ErrUnknownRun when the
// daemon does not run it.
func (c Client) Defer(ctx context.Context, runID int64, d time.Duration) error {
	body, err := json.Marshal(DeferRequest{Seconds: d.Seconds()})
	if err != nil {
		return err
	}
	if err := c.send(ctx, http.MethodPost, DeferPath(runID), body, nil); err != nil {
		return fmt.Errorf("defer run %d: %w", runID, err)
	}
	return nil
}

// Usage reports what run id spent. The error matches ErrUnknownRun when
// the daemon does not run it, ErrBadRequest for an amount out of range.
func (c Client) Usage(ctx context.Context, runID int64, req UsageRequest) (UsageReported, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return UsageReported{}, err
	}
	var out UsageReported
	if err := c.send(ctx, http.MethodPost, UsagePath(runID), body, &out); err != nil {
		return UsageReported{}, fmt.Errorf("report usage of run %d: %w", runID, err)
	}
	return out, nil
}

// Spend takes units of limit name for the run whose token c carries (or
// whose process sends it). The error matches ErrUnknownLimit, ErrRefused
// outside a run, or ErrBadRequest.
func (c Client) Spend(ctx context.Context, name string, units int64) (Limit, error) {
	body, err := json.Marshal(SpendRequest{Units: units})
	if err != nil {
		return Limit{}, err
	}
	var out Limit
	if err := c.send(ctx, http.MethodPost, SpendPath(name), body, &out); err != nil {
		return Limit{}, fmt.Errorf("spend %d units of limit %s: %w", units, name, err)
	}
	return out, nil
}

// Enqueue adds a task to the daemon's own queue. The error matches
// ErrBadRequest when the daemon refused the task as invalid.
func (c Client) Enqueue(ctx context.Context, req EnqueueRequest) (Enqueued, error) {
	var out Enqueued
	body, err := json.Marshal(req)
	if err != nil {
		return out, fmt.Errorf("enqueue through the daemon: %w", err)
	}
	err = c.send(ctx, http.MethodPost, TasksPath, body, &out)
	if err == nil || errors.Is(err, ErrNotRunning) {
		return out, err
	}
	return out, fmt.Errorf("enqueue through the daemon: %w", err)
}

// SetResult sends the result of run id (JSON), stored with its
// completion. The error matches ErrBadRequest when the daemon refused it
// (not JSON, too large), ErrUnknownRun when it does not run the run.
func (c Client) SetResult(ctx context.Context, runID int64, result []byte) error {
	err := c.send(ctx, http.MethodPost, ResultPath(runID), result, nil)
	if err == nil || errors.Is(err, ErrNotRunning) {
		return err
	}
	return fmt.Errorf("store the result of run %d: %w", runID, err)
}

// ParentResults asks for the results of the tasks run id's task waited
// for: one JSON object keyed by task id, as the daemon wrote it.
func (c Client) ParentResults(ctx context.Context, runID int64) ([]byte, error) {
	var out []byte
	err := c.do(ctx, http.MethodGet, ParentsPath(runID), &out)
	if err == nil || errors.Is(err, ErrNotRunning) {
		return out, err
	}
	return nil, fmt.Errorf("read the results run %d's task waited for: %w", runID, err)
}

// Metrics asks the daemon for its Prometheus metrics, in the text format.
func (c Client) Metrics(ctx context.Context) ([]byte, error) {
	var text []byte
	if err := c.do(ctx, http.MethodGet, MetricsPath, &text); err != nil {
		return nil, err
	}
	return text, nil
}

// do sends one request and decodes a JSON answer into out (when not nil;
// a *[]byte gets the answer as it is).
func (c Client) do(ctx context.Context, method, path string, out any) error {
	return c.send(ctx, method, path, nil, out)
}

// send is do with a JSON request body (none when nil).
func (c Client) send(ctx context.Context, method, path string, body []byte, out any) error {
	if err := checkSocketPath(c.Path, 0); err != nil {
		return err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", c.Path)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://qd"+path, rd)
	if err != nil {
		return fmt.Errorf("build request: %w", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json") // compact, see Server.writeJSON
	if c.Token != "" {
		req.Header.Set(TokenHeader, c.Token)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return dialError(c.Path, err)
	}
	defer resp.Body.Close()
	return c.answer(resp, path, out)
}

// answer turns the daemon's answer into out (when not nil) or an error that
// matches the API's sentinels.
func (c Client) answer(resp *http.Response, path string, out any) error {
	body := io.LimitReader(resp.Body, maxResponseBytes)
	words := func() string {
		msg, _ := io.ReadAll(io.LimitReader(body, 2048))
		return strings.TrimSpace(string(msg))
	}
	switch {
	case resp.StatusCode == http.StatusForbidden:
		return &wordsError{daemon: c.Path, msg: words(), is: ErrRefused}
	case resp.StatusCode == http.StatusConflict:
		return &wordsError{daemon: c.Path, msg: words(), is: ErrConflict}
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "/v1/tasks/"):
		return &wordsError{daemon: c.Path, msg: words(), is: ErrUnknownTask}
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "/v1/runs/"):
		return fmt.Errorf("daemon at %s: %w", c.Path, ErrUnknownRun)
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "/v1/limits/"):
		return &wordsError{daemon: c.Path, msg: words(), is: ErrUnknownLimit}
	case resp.StatusCode == http.StatusNotFound && strings.HasPrefix(path, "/v1/agents/"):
		return &wordsError{daemon: c.Path, msg: words(), is: ErrUnknownAgent}
	case resp.StatusCode == http.StatusBadRequest:
		return fmt.Errorf("daemon at %s: %w: %s", c.Path, ErrBadRequest, words())
	case resp.StatusCode/100 != 2:
		return fmt.Errorf("daemon at %s: %s: %s", c.Path, resp.Status, words())
	case out == nil:
		return nil
	}
	if raw, ok := out.(*[]byte); ok {
		var err error
		if *raw, err = io.ReadAll(body); err != nil {
			return fmt.Errorf("read answer of daemon at %s: %w", c.Path, err)
		}
		return nil
	}
	if err := json.NewDecoder(body).Decode(out); err != nil {
		return fmt.Errorf("decode answer of daemon at %s: %w", c.Path, err)
	}
	return nil
}

// dialError turns "nothing there" and "nothing listening" into a
// NotRunningError and names the socket in every other failure.
func dialError(path string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		var errno syscall.Errno
		if errors.As(op.Err, &errno) && (errno == syscall.ENOENT || errno == syscall.ECONNREFUSED) {
			return &NotRunningError{Path: path, Err: errno}
		}
		return fmt.Errorf("connect to qd socket %s: %w", path, op.Err)
	}
	return fmt.Errorf("ask daemon at %s: %w", path, err)
}

// wordsError carries the daemon's words (which agents it runs, what a run
// is allowed) and matches the sentinel is.
type wordsError struct {
	daemon, msg string
	is          error
}

func (e *wordsError) Error() string        { return fmt.Sprintf("daemon at %s: %s", e.daemon, e.msg) }
func (e *wordsError) Is(target error) bool { return target == e.is }
