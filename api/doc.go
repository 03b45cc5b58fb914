// Package api is the daemon's local API: HTTP with JSON on its unix
// socket. It holds the wire types (Snapshot and what it contains, the
// paths), the Server with its one table of routes, and the Client that
// every caller in qd uses (`qd status`, `qd heartbeat` from a child).
// Scripts may use it too, or plain `curl --unix-socket`.
//
// # Facts
//
// facts.go holds the one wire type of each fact qd prints: a task, a run,
// a run in flight (LiveRun), a lane, a claimed lease, a last outcome and a
// periodic schedule, each with its converter from lease's types. The
// socket's Snapshot, `qd ... --json` and the dashboard's /api/ twins all
// print these, so a fact has the same fields wherever it is read, and
// none is ever left out: a time that has not happened, or a number not
// known, is null.
//
// # Endpoints
//
//	method  path                      writes  who may call           answer
//	GET     /v1/status                no      anyone                 200, a Snapshot (docs/status.md)
//	POST    /v1/runs/{id}/progress    yes     operator; run: itself  204; 404 when the daemon does not run it
//	POST    /v1/tasks/{id}/cancel     yes     operator; run: its own 200, a Cancelled (run 0: not run here);
//	                                          task, tasks it         404 no such task; 409 done or failed
//	                                          enqueued
//	POST    /v1/agents/{name}/wake    yes     anyone                 204; 404 naming the agents it runs
//	POST    /v1/tasks                 yes     anyone                 200, an Enqueued; 400 for an invalid task
//	POST    /v1/runs/{id}/defer       yes     operator; run: itself  204: exit 75 then defers by that; 404 when
//	                                                                 the daemon does not run it
//	POST    /v1/runs/{id}/usage       yes     operator; run: itself  200, a UsageReported; 404 when the daemon
//	                                                                 does not run it; 400 amount not from 0
//	POST    /v1/limits/{name}/spend   yes     runs only              200, the Limit; 404 no such limit;
//	                                                                 400 units not from 1 to 2^31
//	GET     /v1/metrics               no      anyone                 200, Prometheus text format (docs/metrics.md)
//	POST    /v1/runs/{id}/result      yes     operator; run: itself  204; 400 not JSON or past 1 MiB; 404 not run here
//	GET     /v1/runs/{id}/parents     no      operator; run: itself  200, the results of the tasks its task waited
//	                                                                 for, keyed by task id; 404 not run here
//
// A progress report counts as output for the agent's stall_timeout; the
// daemon keeps the lease itself. A cancel records the request in the
// database and stops the task's run at once when the daemon runs it. A
// wake claims for the agent at once instead of at its next tick. An
// enqueue adds a task (an EnqueueRequest, at most 3 MiB) to the daemon's
// own queue and records the calling run as its parent; one with after
// waits for those tasks. A result (`qd result -`) is kept with the run
// and stored when it completes; the parents' results (`qd results
// --parents`) are read from the queue. The metrics are the
// daemon's Prometheus exposition, for a scraper that reads the socket or
// for `curl --unix-socket SOCKET http://qd/v1/metrics`. Every endpoint is
// on Server.routes and on the Daemon interface, one method each. The
// package imports no other package of qd but lease, whose types its facts
// convert: the daemon implements Daemon, not the other way.
//
// # Callers
//
// Every child runs as the daemon's user, so the server proves the caller
// of each request once, before its route (Server.identify, caller.go), and
// puts it in the request's context (CallerOf). A run is proved by its
// token (TokenHeader, the child's QD_RUN_TOKEN), or, without one, by the
// peer's process (PeerPID, SO_PEERCRED) being in the run's process group
// or cgroup; anyone else is the operator. A token of no live run, a token
// sent from another run's process, and a peer that is gone are refused. The
// operator may do everything; each route's rule (route.who) decides what a
// run may: progress, a result and its parents' results for itself only,
// cancel of its own task and those it enqueued only; a spend is a run's
// alone; the daemon refuses
// an enqueue by a run after a task that is neither (Daemon.Enqueue). A refusal is 403 with one line saying what is allowed,
// matching ErrRefused at the client; the server logs it with the peer's
// pid and run, and the daemon logs every write with them.
//
// # The socket
//
// Listen binds the socket so that it is never reachable by another user,
// not even for an instant: it binds inside a fresh 0700 directory, narrows
// the socket to 0600 there, and links it into place; the process umask is
// never changed, because it is process-wide and agents fork concurrently.
// Single instance: Listen holds an flock on PATH.lock for the server's
// lifetime, refuses a socket that answers (another daemon) and anything at
// the path that is not a socket, and replaces a socket that refuses
// connections (left by a daemon that died). Shutdown removes the socket
// only if the file at the path is still the one it bound. CheckSocketPath
// is the one check of a path against the platform's sun_path limit.
//
// Any client can be slow or silent: connections are bounded by read,
// write and idle timeouts and by header and body size limits, and each is
// served on its own goroutine, so a client that never sends a byte delays
// nobody. The Daemon's methods must not wait on anything the heartbeat
// loop holds; see Daemon.
//
// The JSON is documented, with an example, in docs/status.md.
package api
