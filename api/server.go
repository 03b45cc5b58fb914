package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
)

// Daemon is what the server asks of the daemon: one method per endpoint
// (see the package doc). The server calls them from the request's
// goroutine.
//
// None may wait on anything the heartbeat loop holds: a slow or stuck
// client must not be able to delay a heartbeat. Each copies what it needs
// under whatever locks it takes and releases them before returning;
// database queries honour ctx, which ends when the request is abandoned or
// its time is up.
type Daemon interface {
	// Status returns the daemon's current state, listing the runs oldest
	// live runs (every one when runs < 0) and counting all of them.
	Status(ctx context.Context, runs int) Snapshot
	// Progress records that the child of run id made progress; it returns
	// an error matching ErrUnknownRun when the daemon does not run it.
	Progress(ctx context.Context, runID int64) error
	// CancelTask records a cancel request for task id in the database and
	// stops at once the task's run if the daemon runs it. The answer has
	// the task's state after the request and the run stopped (0 for none).
	// An error matches ErrUnknownTask when there is no such task, and
	// ErrConflict when it is already done or failed.
	CancelTask(ctx context.Context, taskID int64) (Cancelled, error)
	// Wake claims for agent now; an error matching ErrUnknownAgent, naming
	// the agents the daemon runs, when it runs no such agent.
	Wake(ctx context.Context, agent string) error
	// Enqueue adds a task to the daemon's queue, its parent_run the
	// caller's run (CallerOf); an error matching ErrBadRequest when the
	// task is invalid, ErrRefused when a run makes it wait for a task
	// that is neither its own nor one it enqueued.
	Enqueue(ctx context.Context, req EnqueueRequest) (Enqueued, error)
	// Defer records that the child of run id, should it exit 75, asks
	// for its task to be tried again after d; an error matching
	// ErrUnknownRun when the daemon does not run it.
	Defer(ctx context.Context, runID int64, d time.Duration) error
	// Usage adds what run id reported it spent to the run and its
	// agent's budget; an error matching ErrUnknownRun when the daemon
	// does not run it, ErrBadRequest for an amount out of range.
	Usage(ctx context.Context, runID int64, req UsageRequest) (UsageReported, error)
	// Spend takes units of limit name for the caller's run (CallerOf); an
	// error matching ErrUnknownLimit when there is no such limit, and
	// ErrBadRequest for units out of range.
	Spend(ctx context.Context, name string, units int64) (Limit, error)
	// Metrics is the handler of GET /v1/metrics, the Prometheus
	// exposition; nil answers 404.
	Metrics() http.Handler
	// SetResult records the result of run id, stored with its completion;
	// an error matching ErrBadRequest when it is not JSON or too large,
	// ErrUnknownRun when the daemon does not run it.
	SetResult(ctx context.Context, runID int64, result []byte) error
	// ParentResults returns the results of the tasks run id's task waited
	// for, keyed by task id; ErrUnknownRun when the daemon does not run it.
	ParentResults(ctx context.Context, runID int64) (map[int64]json.RawMessage, error)

	// RunOfToken returns the live run whose child was given token (its
	// QD_RUN_TOKEN), zero when none was.
	RunOfToken(token string) RunRef
	// RunOfPeer returns the live run that process pid belongs to (its
	// process group, or its cgroup), zero when none does or pid is 0
	// (unknown); an error when there is no process pid (it is gone).
	RunOfPeer(pid int) (RunRef, error)
	// TaskParent returns the run that enqueued task id, 0 when none did;
	// an error matching ErrUnknownTask when there is no such task.
	TaskParent(ctx context.Context, taskID int64) (int64, error)
}

// PeerPID is the pid of the process that sent the request in ctx (read
// from the socket, SO_PEERCRED), 0 when unknown. The server proves the
// caller from it (CallerOf); the daemon logs it with every write.
func PeerPID(ctx context.Context) int {
	if c, ok := ctx.Value(connKey{}).(net.Conn); ok {
		return peerPID(c)
	}
	return 0
}

type connKey struct{}

// Limits on one connection. Every one of them bounds a client that is slow
// or silent; none of them can hold anything the daemon needs.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 15 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 8 << 10
	snapshotTimeout   = 10 * time.Second
	maxBodyBytes      = 64 << 10
	// maxEnqueueBytes fits a payload of the queue's largest (1 MiB),
	// escaped, and the rest of the request.
	maxEnqueueBytes = 3 << 20
	// maxResultBytes lets a result one byte past the queue's limit reach
	// the daemon, which refuses it saying so.
	maxResultBytes = lease.MaxResultBytes + 1
)

// Server serves Snapshots over HTTP on a unix socket.
type Server struct {
	sock   *socket
	hs     *http.Server
	mux    *http.ServeMux
	d      Daemon
	logger hclog.Logger

	mu    sync.Mutex
	fresh map[net.Conn]struct{} // accepted, no request byte read yet

	closeOnce sync.Once
	closeErr  error

	// runsOnly refuses the operator: the socket of ListenRuns.
	runsOnly bool
}

// Listen binds the status socket at path and returns a Server ready to
// Serve. The parent directory is created with mode 0700 when missing (an
// existing one keeps its mode). The socket has mode 0600 from the first
// moment it exists. Listen fails, leaving everything in place, when another
// qd holds path+".lock" or answers on the socket, or when path is something
// other than a socket; a socket nobody answers on is stale and replaced.
func Listen(path string, d Daemon, logger hclog.Logger) (*Server, error) {
	return listen(path, d, logger, false)
}

// ListenRuns binds the socket of the runs of agents that run as another
// user than the daemon's, at path, and returns a Server ready to Serve.
// Any local user may connect to it (mode 0666; what guards it is the
// directory that holds it, and this rule): it serves only requests it
// proves to be a live run's, by the run's token or process, the same
// routes with the same rules as Listen's; anyone else is refused. The
// operator uses the daemon's own socket.
func ListenRuns(path string, d Daemon, logger hclog.Logger) (*Server, error) {
	s, err := listen(path, d, logger, true)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		s.Shutdown(context.Background())
		return nil, fmt.Errorf("open the runs' socket to their users: %w", err)
	}
	return s, nil
}

func listen(path string, d Daemon, logger hclog.Logger, runsOnly bool) (*Server, error) {
	sock, err := bindSocket(path)
	if err != nil {
		return nil, err
	}
	s := &Server{sock: sock, d: d, logger: logger, fresh: map[net.Conn]struct{}{}, runsOnly: runsOnly}
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		limit := int64(maxBodyBytes)
		if rt.body > 0 {
			limit = rt.body
		}
		mux.Handle(rt.pattern, http.MaxBytesHandler(s.guard(rt), limit))
	}
	s.mux = mux
	s.hs = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         s.trackConn,
		ConnContext:       func(ctx context.Context, c net.Conn) context.Context { return context.WithValue(ctx, connKey{}, c) },
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	s.hs.RegisterOnShutdown(s.closeFresh)
	if sock.replaced {
		logger.Warn("replaced a stale status socket left by a daemon that did not shut down", "path", path)
	}
	logger.Info("status socket listening", "path", path)
	return s, nil
}

// Path is the socket's path.
func (s *Server) Path() string { return s.sock.path }

// Serve answers requests until Shutdown; it then returns nil. It is the
// execute function of an oklog/run actor, with Shutdown as its interrupt.
func (s *Server) Serve() error {
	err := s.hs.Serve(s.sock.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, closes those that have not sent a
// request, and waits for requests in progress until ctx ends, then closes
// whatever is left. It removes the socket if the file at its path is still
// the one Listen created, and releases the lock. It is safe to call more
// than once, and before Serve. It returns ctx's error when it had to close
// requests still in progress.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var forced error
		if err := s.hs.Shutdown(ctx); err != nil {
			s.logger.Warn("status socket: requests still running at shutdown, closing them", "error", err)
			s.hs.Close()
			forced = fmt.Errorf("shut down status socket: %w", err)
		}
		s.closeErr = errors.Join(forced, s.sock.Close())
	})
	return s.closeErr
}

// route is one endpoint: its method and path, its handler, the most body
// it reads (maxBodyBytes when 0), and who may call it (nil: anyone).
type route struct {
	pattern string
	handler http.HandlerFunc
	body    int64
	who     rule
}

// routes is the API, every endpoint of it; the package doc lists them.
func (s *Server) routes() []route {
	return []route{
		{"GET " + StatusPath, s.handleStatus, 0, anyone},
		{"POST " + progressPattern, s.handleProgress, 0, ownRun},
		{"POST " + cancelPattern, s.handleCancel, 0, ownTasks},
		{"POST " + wakePattern, s.handleWake, 0, anyone},
		{"POST " + TasksPath, s.handleEnqueue, maxEnqueueBytes, anyone},
		{"POST " + deferPattern, s.handleDefer, 0, ownDefer},
		{"POST " + usagePattern, s.handleUsage, 0, ownUsage},
		{"POST " + spendPattern, s.handleSpend, 0, inRun},
		{"GET " + MetricsPath, s.handleMetrics, 0, anyone},
		{"POST " + resultPattern, s.handleResult, maxResultBytes, ownRunTo("store a result")},
		{"GET " + parentsPattern, s.handleParents, 0, ownRunTo("read the results of the tasks it waited for")},
	}
}

func (s *Server) handleResult(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run")
	if !ok {
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, fmt.Sprintf("read the result: %v (a result holds at most %d bytes)", err, lease.MaxResultBytes), http.StatusBadRequest)
		return
	}
	if err := s.d.SetResult(r.Context(), id, body); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleParents(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run")
	if !ok {
		return
	}
	res, err := s.d.ParentResults(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	s.writeJSON(w, r, res)
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), snapshotTimeout)
	defer cancel()
	runs := -1
	if v := r.URL.Query().Get("runs"); v != "" && v != "all" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			http.Error(w, fmt.Sprintf("runs=%q: give how many live runs to list, 0 or more, or all", v), http.StatusBadRequest)
			return
		}
		runs = n
	}
	snap := s.d.Status(ctx, runs)
	normalize(&snap)
	s.writeJSON(w, r, snap)
}

func (s *Server) handleProgress(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run")
	if !ok {
		return
	}
	if err := s.d.Progress(r.Context(), id); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "task")
	if !ok {
		return
	}
	res, err := s.d.CancelTask(r.Context(), id)
	if err != nil {
		fail(w, err)
		return
	}
	s.writeJSON(w, r, res)
}

func (s *Server) handleWake(w http.ResponseWriter, r *http.Request) {
	if err := s.d.Wake(r.Context(), r.PathValue("name")); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleEnqueue(w http.ResponseWriter, r *http.Request) {
	var req EnqueueRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "decode the task: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := s.d.Enqueue(r.Context(), req)
	if err != nil {
		fail(w, err)
		return
	}
	s.writeJSON(w, r, res)
}

func (s *Server) handleDefer(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run")
	if !ok {
		return
	}
	var req DeferRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "decode the deferral: "+err.Error(), http.StatusBadRequest)
		return
	}
	d := time.Duration(req.Seconds * float64(time.Second))
	if req.Seconds <= 0 || d > MaxDefer {
		http.Error(w, fmt.Sprintf("a deferral is more than 0 s and at most %s, got %g s", MaxDefer, req.Seconds), http.StatusBadRequest)
		return
	}
	if err := s.d.Defer(r.Context(), id, d); err != nil {
		fail(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r, "run")
	if !ok {
		return
	}
	var req UsageRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "decode the usage: "+err.Error(), http.StatusBadRequest)
		return
	}
	res, err := s.d.Usage(r.Context(), id, req)
	if err != nil {
		fail(w, err)
		return
	}
	s.writeJSON(w, r, res)
}

func (s *Server) handleSpend(w http.ResponseWriter, r *http.Request) {
	var req SpendRequest
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		http.Error(w, "decode the spend: "+err.Error(), http.StatusBadRequest)
		return
	}
	l, err := s.d.Spend(r.Context(), r.PathValue("name"), req.Units)
	if err != nil {
		fail(w, err)
		return
	}
	s.writeJSON(w, r, l)
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request) {
	h := s.d.Metrics()
	if h == nil {
		http.Error(w, "this daemon serves no metrics", http.StatusNotFound)
		return
	}
	h.ServeHTTP(w, r)
}

// pathID reads the positive id in the request's path, or answers 400 naming
// what it is the id of.
func pathID(w http.ResponseWriter, r *http.Request, of string) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		http.Error(w, of+" id must be a positive integer", http.StatusBadRequest)
		return 0, false
	}
	return id, true
}

// fail answers err with the status of the API's sentinel it matches, else
// 500.
func fail(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, ErrRefused):
		code = http.StatusForbidden
	case errors.Is(err, ErrBadRequest):
		code = http.StatusBadRequest
	case errors.Is(err, ErrUnknownRun), errors.Is(err, ErrUnknownAgent), errors.Is(err, ErrUnknownTask),
		errors.Is(err, ErrUnknownLimit):
		code = http.StatusNotFound
	case errors.Is(err, ErrConflict):
		code = http.StatusConflict
	}
	http.Error(w, err.Error(), code)
}

// writeJSON answers with v as JSON: compact for a client that asks for
// application/json (qd's own: a status of 10,000 runs is megabytes, and
// indenting it took most of the answer's time), indented for the others
// (curl, a browser), which people read.
func (s *Server) writeJSON(w http.ResponseWriter, r *http.Request, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	if r.Header.Get("Accept") != "application/json" {
		enc.SetIndent("", "  ")
	}
	if err := enc.Encode(v); err != nil {
		s.logger.Debug("status socket: write response", "error", err)
	}
}

// normalize makes empty lists encode as [] rather than null, so clients can
// iterate without a nil check.
func normalize(s *Snapshot) {
	if s.Agents == nil {
		s.Agents = []AgentStatus{}
	}
	if s.Runs == nil {
		s.Runs = []LiveRun{}
	}
	if s.Lanes == nil {
		s.Lanes = []LaneStatus{}
	}
	if s.Periodics == nil {
		s.Periodics = []Periodic{}
	}
	if s.Unserved == nil {
		s.Unserved = []UnservedAgent{}
	}
	if s.Limits == nil {
		s.Limits = []Limit{}
	}
	if s.Budgets == nil {
		s.Budgets = []Budget{}
	}
}

// trackConn remembers connections that have not sent a byte, so Shutdown
// can close them at once rather than wait for them to time out.
func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == http.StateNew {
		s.fresh[c] = struct{}{}
		return
	}
	delete(s.fresh, c)
}

func (s *Server) closeFresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.fresh {
		c.Close()
		delete(s.fresh, c)
	}
}
