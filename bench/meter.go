package bench

import (
	"context"
	"time"
)

// meterReading is one reading of what a daemon costs: its CPU, the CPU of
// each PostgreSQL backend serving it, and the transactions of its database.
type meterReading struct {
	daemon   procCPU
	backends map[int]time.Duration
	xacts    int64
	commits  int64
	machine  machineCPU
	// sent is the daemon's own count of the transactions it sent
	// (qd_database_transactions_total); -1 when it gives none.
	sent int64
}

// readMeter reads the CPU of the daemon's backends and of the daemon, then,
// after wait, the database's transactions; a reading after work waits for
// the backends to publish their counts (at most once a second).
func readMeter(ctx context.Context, db *database, d *daemonProc, wait time.Duration) (meterReading, error) {
	var m meterReading
	pids, err := db.backends(ctx, daemonApp)
	if err != nil {
		return m, err
	}
	m.backends = cpuOf(pids)
	if m.daemon, err = readProcCPU(d.pid()); err != nil {
		return m, err
	}
	if m.machine, err = readMachine(); err != nil {
		return m, err
	}
	if err := sleepCtx(ctx, wait); err != nil {
		return m, err
	}
	m.xacts, m.commits, err = db.transactions(ctx)
	if err != nil {
		return m, err
	}
	m.sent, err = d.sentTransactions(ctx)
	return m, err
}

// cost is what a daemon used between two meter readings.
type cost struct {
	Daemon   time.Duration // the daemon's own CPU
	Children time.Duration // its children's CPU
	Postgres time.Duration // the CPU of the backends serving the daemon
	Xacts    int64         // transactions of the daemon's database
	// Sent is the transactions the daemon counted as it sent them; -1 when
	// it does not count them.
	Sent    int64
	Commits int64      // the committed ones among them
	Machine machineCPU // every process of the machine
}

// since is the cost from the reading m0 to m.
func (m meterReading) since(m0 meterReading) cost {
	return cost{
		Daemon:   m.daemon.Self - m0.daemon.Self,
		Children: m.daemon.Children - m0.daemon.Children,
		Postgres: cpuDelta(m0.backends, m.backends),
		Xacts:    m.xacts - m0.xacts,
		Sent:     sentSince(m0.sent, m.sent),
		Commits:  m.commits - m0.commits,
		Machine:  m.machine.since(m0.machine),
	}
}

func sentSince(a, b int64) int64 {
	if a < 0 || b < 0 {
		return -1
	}
	return b - a
}
