// Package faults proves qd's promises under faults: it runs real daemons
// against a real PostgreSQL, with fake agents (fakeagent) that record every
// start, tick and end of their runs in an audit table from their own
// connection, injects faults (killed connections, a cut or blackholed
// network, SIGSTOP, kill -9, signals, floods, bad input, a failover to a
// restored copy a few seconds behind, a state directory deleted, a wall
// clock that jumps, a thousand lanes, another local user, a flood of live
// pages and clients that trickle at a daemon's dashboard) and checks the
// invariants from the audit trail and qd's tables: no task lost, no two runs
// of one task at once, no lane over its limit, no stale write applied, no
// orphan process, no secret leaked.
//
// Every run prints its figures last: `go test -v ./faults`, or set
// QD_FAULTS_FIGURES to a file to have them written there as well. `-soak`
// runs a longer randomised variant with a printed seed (`-seed N` replays).
package faults
