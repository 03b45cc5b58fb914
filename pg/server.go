package pg

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// serverIdentity names the server and database a new connection reached:
// the postmaster's start time and the database's oid. It changes when the
// server restarted, when a replica was promoted in its place, or when the
// database is another one (a copy restored under the same URL).
const serverIdentity = `SELECT pg_postmaster_start_time()::text || ' ' ||
	(SELECT oid FROM pg_database WHERE datname = current_database())::text`

// afterConnect records the identity of the server each new connection
// reached, and when it changed.
func (p *Provider) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	var id string
	if err := conn.QueryRow(ctx, serverIdentity).Scan(&id); err != nil {
		return nil // the connection's first real use says what is wrong
	}
	p.serverMu.Lock()
	defer p.serverMu.Unlock()
	if p.server != "" && p.server != id {
		p.serverChanged = time.Now()
		p.logger.Warn("the database server changed under qd (a restart, a failover, or another database at the same address): runs it does not know are lost",
			"was", p.server, "now", id)
	}
	p.server = id
	return nil
}

// ServerChangedAt is when a new connection last found another server (or
// database) than the one before, by this process's clock; zero when none
// did. A server that changed may have lost the latest committed runs (an
// asynchronous replica promoted, a copy restored): their holders learn it
// at their next heartbeat, and until then the database counts their lanes
// short.
func (p *Provider) ServerChangedAt() time.Time {
	p.serverMu.Lock()
	defer p.serverMu.Unlock()
	return p.serverChanged
}
