// Package supervisor runs claimed tasks as child processes, heartbeats their
// leases and settles their runs.
//
// # Children
//
// Each run is one child in its own process group and, where the daemon can
// create cgroups (cgroup2 delegated to it, or root), in a cgroup of its own
// that it is created in (clone3), killed with (cgroup.kill), measured by
// (CPU time, memory peak) and removed after: see cgroup_linux.go for the
// layout and Containment for what is in force. It is started from a
// long-lived OS thread (on Linux the parent-death signal fires when the
// creating thread exits, so that thread never exits). The payload arrives on
// stdin; the environment is an allowlist of the daemon's (PATH, HOME, USER,
// LANG, LC_*, TZ and the like) plus the QD_ variables and the agent's own
// env, so database URLs, PG* variables and systemd's sockets never leak.
// QD_RUN_TOKEN is a random secret made for each run and kept only in its
// child handle: the daemon's socket takes it as proof of the run
// (RunOfToken), and knows a run by its processes too (RunOfProcess).
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
