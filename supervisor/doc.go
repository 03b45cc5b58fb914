// Package supervisor runs claimed tasks as child processes, heartbeats their
// leases and settles their runs.
//
// # Children
//
// Each run is one child in its own process group and, where the daemon can
// create cgroups (cgroup2 delegated to it, or root), in a cgroup of its own
// that it is created in (clone3), killed with (cgroup.kill), measured by
// (CPU time, memory peak) and removed after: see cgroup_tree_linux.go for the
// layout and Containment for what is in force. It is started from a
// long-lived OS thread (on Linux the parent-death signal fires when the
// creating thread exits, so that thread never exits). The payload arrives on
// stdin; the environment is an allowlist of the daemon's (PATH, HOME, USER,
// LANG, LC_*, TZ and the like) plus the QD_ variables and the agent's own
// env, so database URLs, PG* variables and systemd's sockets never leak.
// QD_RUN_TOKEN is a random secret made for each run and kept only in its
// child handle: the daemon's socket takes it as proof of the run
// (RunOfToken), and knows a run by its processes too (RunOfProcess).
// A child may run as another user (Spec.User, a daemon that is root),
// in a fresh working directory, <StateDir>/work/<run_id>, removed when
// the run is over unless the agent keeps it (Spec.Workdir), and in a box
// (Spec.Box, package internal/box): then the child is the qd binary
// started again as the shim, which builds the box around itself and execs
// the agent's program, and Start returns only once the box is in force;
// a box that cannot be made fails the run, and the program never starts.
// stdout and stderr go to <StateDir>/runs/<run_id>.log (created with the
// first output: a run that writes nothing has none), through pipes the
// supervisor owns and reads with fixed buffers: endless output, endless lines
// and grandchildren that keep a pipe open cost bounded memory and never block
// the child or the daemon. Every child's group and start time are recorded
// in a journal under <StateDir>/children (one append-only file per daemon,
// not a file per child) so that KillOrphans can kill the groups a crashed
// incarnation left behind, and never a recycled pid.
//
// # Leases
//
// One loop, Supervisor.Loop, heartbeats every live run with one
// Provider.Heartbeat call per pass. Each run keeps a local deadline, measured
// with the monotonic clock from when its last successful heartbeat was sent,
// plus the lease, minus a margin. If a heartbeat reports the lease lost, or the deadline passes
// without an answer, the child's group is killed at once: two copies of one
// task must never run. Database errors are logged and retried; the loop never
// returns because of them.
//
// # Files, in the order one run passes through them
//
//	supervisor.go          Spec (what the daemon asks of a run), Config, New, the Supervisor
//	start.go               Start: refuse a late claim, launch: pipes, environment, cgroup, spawn;
//	                       a start the daemon cannot make is given back (ErrNoResources)
//	env.go                 the child's environment: the allowlist, the QD_ variables, the run token
//	workdir.go             a run's fresh working directory, the runs' socket beside it; kept or removed
//	result.go              $QD_RESULT and $QD_PARENT_RESULTS, a result sent through the socket
//	box.go                 who the child runs as, and its box: the shim started in its place, waited on
//	pipe_linux.go          the child's pipes (pipe_other.go elsewhere)
//	cgroup.go              Containment, Limits and what is in force
//	cgroup_probe_linux.go  finding the cgroup2 mount, this process's cgroup, delegation
//	cgroup_tree_linux.go   the supervisor's directory of run cgroups: slots, leftovers of dead daemons
//	cgroup_run_linux.go    one run's cgroup: the child cloned into it, killed with it, measured, released
//	spawn.go               the long-lived spawner threads that fork children
//	sys_linux.go           process attributes, pidfds, the wait for the exit (sys_darwin.go, sys_other.go)
//	journal.go, orphans.go the record of every child, and the sweep that kills a dead daemon's
//	output.go              the child's output: run log, stream record, tail, last lines
//	child.go               the handle of one run: its state lock, lease bookkeeping, stop steps
//	loop.go                the heartbeat loop: batched heartbeats, deadlines, timeouts, stalls, fencing
//	progress.go            progress reported through the socket, and which run a process or token is
//	cancel.go              cancel requests: polled from the queue, or from the socket
//	stop.go                why a child is stopped and how far, then the outcome its end settles as
//	wait.go                the child's end: output drained, group killed, reaped, usage read
//	settle.go              settlements group-committed in one Provider.Settle call
//	end.go                 End, what the daemon is told of each run
//	drain.go               shutdown: the grace, then the kill, then the give-back
//	statedir.go            the health of the state directory the logs go to
//	caps.go                the limits that cap how many children can start (caps_linux.go)
//
// # Outcomes
//
// Exit 0 completes the run, a non-zero exit fails the attempt, death by
// signal, timeout, stall and shutdown abandon it, a cancel request cancels it,
// and a lost lease settles nothing. Runs that end close together are settled
// in one Provider.Settle call. Why a child was stopped (stopReason, and which
// reason replaces which) and how far its group has been signalled
// (stopState, and the signal each step sends) are each one type with its
// rules in a table, in stop.go.
package supervisor
