// Package daemon is `qd run` once its flags and config are read: Run wires
// the queue, the supervisor, the scheduler and the socket together as
// oklog/run actors and runs them until a signal has drained it.
//
// # The path, tick to status
//
//	tick       scheduler.Scheduler.Run fires an agent's schedule    scheduler/scheduler.go
//	claim      claimOnce → lease.Provider.ClaimMany                  scheduler/scheduler.go, pg/claim.go
//	hand-over  runner.Start: the agent's Spec, or a give-back       daemon/adapter.go
//	spawn      supervisor.Start → launch → spawn                    supervisor/start.go, spawn.go
//	heartbeat  the supervisor's loop, one Heartbeat per pass        supervisor/loop.go
//	settle     wait → settlement → settleLoop → Provider.Settle     supervisor/wait.go, stop.go, settle.go
//	status     api.Server → daemon.Status (copies, no waiting)      api/server.go, daemon/status.go
//
// # What else it does
//
//   - Start-up (daemon.go): lock the state directory and read the earlier
//     incarnations (incarnation.go), claim the daemon's name in the
//     queue's registry when it has one (name.go), kill the process groups a
//     crashed incarnation left (supervisor.KillOrphans), bind the socket.
//   - Housekeeping (housekeeping.go): abandon the runs of the earlier
//     incarnations at once, then prune finished history when the config
//     sets a retention (Prune, shared with `qd prune`).
//   - Reload (reload.go): SIGHUP reads the config file again; agents and
//     periodic schedules change at once without touching running children;
//     database, name, socket and state_dir need a restart; an invalid file
//     keeps the running config and is shown in the status.
//   - Signals: the first SIGTERM or SIGINT drains (stop claiming, signal the
//     children, wait up to shutdown_grace, abandon what is left); a second
//     one skips the grace.
//   - The local server (localserver.go): when the daemon runs on the
//     private cluster, cmd/qd hands it a LocalServer; the daemon waits on
//     it (its Await: the postmaster's exit, no polling), starts it again
//     within a second of its death and, under a service manager,
//     stops it once the drain is over and the queue closed, before it
//     exits, since the manager kills what is left of the unit then.
//   - systemd (sdnotify.go): READY, RELOADING, STOPPING, STATUS and the
//     watchdog, fed from the heartbeat loop so that a wedged loop restarts
//     the daemon and a database outage does not; the loop, which sleeps
//     while no run is live, then passes at least every quarter interval.
//   - The state directory (statedir.go): watched with inotify
//     (statewatch_linux.go) and remade if deleted under the daemon.
//
// Nothing on the lease path waits on the log: the log goes through
// internal/logsink. The logger (logger.go) writes durations as text
// ("30s"), in JSON as in text. The daemon runs over the *lease.Backend it
// is given (Options.Open opens it with the daemon's logger) and uses each
// ability of it by its field, doing without one that is nil; it imports
// no backend, and only cmd/qd imports it.
package daemon
