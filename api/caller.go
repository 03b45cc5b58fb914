package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
)

// TokenHeader carries a run's token on a request: the QD_RUN_TOKEN the
// daemon gave the run's child. A Client with a Token sends it; with curl,
// -H "Qd-Run-Token: $QD_RUN_TOKEN".
const TokenHeader = "Qd-Run-Token"

// How a Caller's run was proved (Caller.By).
const (
	// ByToken: the request carried the run's token.
	ByToken = "token"
	// ByProcess: the process that sent it is in the run's process group,
	// or in its cgroup.
	ByProcess = "process"
)

// RunRef names a live run of the daemon and its task.
type RunRef struct {
	RunID, TaskID int64
}

// Caller is who sent a request on the socket, proved once per request
// before any route sees it (see Server.identify). RunID is 0 for the
// operator: the daemon's own user, the only one the 0600 socket admits,
// from a process that belongs to no run.
type Caller struct {
	PID int // the peer's pid (SO_PEERCRED), 0 when unknown
	RunRef
	By string // ByToken or ByProcess; "" for the operator
}

// Operator reports whether c is the operator rather than a run.
func (c Caller) Operator() bool { return c.RunID == 0 }

type callerKey struct{}

// CallerOf is the caller of the request in ctx, as the server proved it:
// the Daemon's methods read it, to record the run behind an enqueue or to
// log who asked. A ctx that has none is the operator's.
func CallerOf(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// ErrRefused: the caller may not make the request. The server answers 403
// Forbidden with one line that says what the caller is allowed; the
// client's error matches it again.
var ErrRefused = errors.New("refused")

// refusef is a refusal, matching ErrRefused, whose text says what is
// allowed.
func refusef(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrRefused}, args...)...)
}

// identify proves the caller of r, once. A token names its run, and must
// be a live run's and sent from no other run's process; without one, the
// run whose process group or cgroup holds the peer is the caller, and
// with none the operator is. On a refusal the Caller still names the peer
// (its pid and run) for the log.
func (s *Server) identify(r *http.Request) (Caller, error) {
	c := Caller{PID: PeerPID(r.Context())}
	peer, err := s.d.RunOfPeer(c.PID)
	if err != nil {
		return c, refusef("the process that sent the request (pid %d) is gone, so the daemon cannot tell whose it is; wait for the answer", c.PID)
	}
	token := r.Header.Get(TokenHeader)
	if token == "" {
		if peer.RunID != 0 {
			c.RunRef, c.By = peer, ByProcess
		}
		return c, nil
	}
	owner := s.d.RunOfToken(token)
	switch {
	case owner.RunID == 0:
		c.RunRef = peer
		return c, refusef("the run token matches no live run of this daemon: the run has ended, or the token is not this daemon's; a token is good only while its run lives")
	case peer.RunID != 0 && peer.RunID != owner.RunID:
		c.RunRef = peer
		return c, refusef("the run token is run %d's, but the request comes from a process of run %d; a run may act only as itself", owner.RunID, peer.RunID)
	}
	c.RunRef, c.By = owner, ByToken
	return c, nil
}

// A rule says whether c may make request r: nil when it may, else an
// error; a refusal (ErrRefused) says in one line what is allowed. The
// operator may do everything; a rule decides only for runs. A rule that
// needs the path's id leaves an invalid one to the handler, which answers
// 400 and does nothing.
type rule func(s *Server, c Caller, r *http.Request) error

// anyone lets every caller through: reads, enqueues, wakes.
var anyone rule

// ownRun lets a run report progress for itself alone.
var ownRun = ownRunTo("report progress")

// ownRunTo lets a run do what for itself alone (store its result, read
// its parents' results).
func ownRunTo(what string) rule {
	return func(_ *Server, c Caller, r *http.Request) error {
		id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
		if c.Operator() || err != nil || id == c.RunID {
			return nil
		}
		return refusef("run %d may %s only for itself, not for run %d", c.RunID, what, id)
	}
}

// inRun lets runs alone through: what a run reports of its own work
// (units it spent) means nothing from outside one.
func inRun(_ *Server, c Caller, _ *http.Request) error {
	if c.Operator() {
		return refusef("only a run may report what it spent: this is for agents, from inside a run (QD_SOCKET and QD_RUN_TOKEN set)")
	}
	return nil
}

// ownDefer lets a run defer itself alone.
func ownDefer(_ *Server, c Caller, r *http.Request) error { return self(c, r, "defer") }

// ownUsage lets a run report its own usage alone.
func ownUsage(_ *Server, c Caller, r *http.Request) error { return self(c, r, "report usage for") }

// self refuses a run that would do what to another run.
func self(c Caller, r *http.Request, what string) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if c.Operator() || err != nil || id == c.RunID {
		return nil
	}
	return refusef("run %d may %s only itself, not run %d", c.RunID, what, id)
}

// ownTasks lets a run cancel its own task and the tasks it enqueued
// (parent_run is the run), no other.
func ownTasks(s *Server, c Caller, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if c.Operator() || err != nil || id <= 0 || id == c.TaskID {
		return nil
	}
	parent, err := s.d.TaskParent(r.Context(), id)
	if err != nil {
		return err
	}
	if parent == c.RunID {
		return nil
	}
	return refusef("run %d may cancel only its own task (%d) and the tasks it enqueued; task %d is neither", c.RunID, c.TaskID, id)
}

// guard proves the caller of each request to rt and applies rt's rule
// before rt's handler runs, with the caller in the request's context. A
// refusal is answered 403 and logged with the peer's pid and run.
func (s *Server) guard(rt route) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := s.identify(r)
		if err == nil && s.runsOnly && c.Operator() {
			err = refusef("this socket serves only the runs of agents that run as another user, each proved by its token (QD_RUN_TOKEN, sent as %s) or its processes; use the daemon's own socket", TokenHeader)
		}
		if err == nil && rt.who != nil {
			err = rt.who(s, c, r)
		}
		if err != nil {
			if errors.Is(err, ErrRefused) {
				s.logger.Warn("socket request refused", "method", r.Method, "path", r.URL.Path,
					"peer_pid", c.PID, "peer_run", c.RunID, "proved_by", c.By, "reason", err.Error())
			}
			fail(w, err)
			return
		}
		rt.handler(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}
