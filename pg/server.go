package pg

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// serverIdentity says which server a new connection reached and how far
// its history goes: the cluster's system identifier (made by initdb, kept
// by every copy and replica of it), the timeline of its write-ahead log
// (a promoted standby starts a new one), the database's oid (another
// database restored under the same URL has another), the WAL position,
// and the postmaster's start time. On a standby the query fails, and the
// connection is left to fail at its first write.
const serverIdentity = `SELECT (SELECT system_identifier::text FROM pg_control_system()),
	('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int,
	(SELECT oid FROM pg_database WHERE datname = current_database())::int8,
	pg_current_wal_lsn()::text,
	pg_postmaster_start_time()::text`

// serverID is what serverIdentity reads.
type serverID struct {
	system   string
	timeline int
	database int64
	lsn      uint64
	started  string
}

// parseLSN reads a WAL position written X/Y in hex.
func parseLSN(s string) (uint64, error) {
	hi, lo, ok := strings.Cut(s, "/")
	var h, l uint64
	if _, err := fmt.Sscanf(hi+" "+lo, "%x %x", &h, &l); !ok || err != nil {
		return 0, fmt.Errorf("parse WAL position %q", s)
	}
	return h<<32 | l, nil
}

// changeOf says why next is another server than prev, whose history
// reached seen: "" when it is the same server, restarted or not. A restart
// keeps the system identifier, the timeline and the database, and its WAL
// goes on from where it was, so it loses nothing committed; anything else
// may have lost the latest runs.
func changeOf(prev, next serverID, seen uint64) string {
	switch {
	case next.system != prev.system:
		return "another cluster answers (system identifier " + prev.system + " then " + next.system + ")"
	case next.database != prev.database:
		return fmt.Sprintf("another database answers (oid %d then %d): a copy restored under the same URL", prev.database, next.database)
	case next.timeline != prev.timeline:
		return fmt.Sprintf("the cluster is on another timeline (%d then %d): a standby was promoted", prev.timeline, next.timeline)
	case next.lsn < seen:
		return fmt.Sprintf("the cluster's write-ahead log is behind what this qd saw (%X/%X then %X/%X): a copy restored behind",
			seen>>32, uint32(seen), next.lsn>>32, uint32(next.lsn))
	}
	return ""
}

// afterConnect records the identity of the server each new connection
// reached, and when it changed. A restart of the same server is noted in
// the log and changes nothing.
func (p *Provider) afterConnect(ctx context.Context, conn *pgx.Conn) error {
	// What was seen before this query is sent is behind what it reads, on
	// the same server: a position other connections read meanwhile may not
	// be, and is left out of the comparison.
	p.serverMu.Lock()
	seen := p.seenLSN
	p.serverMu.Unlock()
	var id serverID
	var lsn string
	err := conn.QueryRow(ctx, serverIdentity).Scan(&id.system, &id.timeline, &id.database, &lsn, &id.started)
	if err == nil {
		id.lsn, err = parseLSN(lsn)
	}
	if err != nil {
		return nil // the connection's first real use says what is wrong
	}
	p.serverMu.Lock()
	defer p.serverMu.Unlock()
	prev := p.server
	p.server = &id
	if prev == nil {
		p.seenLSN = max(p.seenLSN, id.lsn)
		return nil
	}
	if why := changeOf(*prev, id, seen); why != "" {
		p.serverChanged, p.changeWhy = time.Now(), why
		p.logger.Warn("the database server changed under qd: runs it does not know are lost", "why", why)
	} else if id.started != prev.started {
		p.logger.Info("the database server restarted; same cluster, timeline and write-ahead log, so nothing committed was lost",
			"started", id.started)
	}
	p.seenLSN = max(p.seenLSN, id.lsn)
	return nil
}

// sawLSN records a WAL position a transaction of this provider saw.
func (p *Provider) sawLSN(s string) {
	lsn, err := parseLSN(s)
	if err != nil {
		return
	}
	p.serverMu.Lock()
	defer p.serverMu.Unlock()
	p.seenLSN = max(p.seenLSN, lsn)
	p.lsnAt = time.Now()
}

// lsnEvery is how often a transaction also reads the WAL position, so
// that a copy restored behind it is told from a restart.
const lsnEvery = time.Second

// lsnDue reports whether the next transaction should read the WAL
// position.
func (p *Provider) lsnDue() bool {
	p.serverMu.Lock()
	defer p.serverMu.Unlock()
	return time.Since(p.lsnAt) >= lsnEvery
}

// ServerChange is when a new connection last found another server (or
// database, or history) than the one before, by this process's clock, and
// why; zero when none did. A restart of the same server is no change. A
// server that changed may have lost the latest committed runs (an
// asynchronous replica promoted, a copy restored): their holders learn it
// at their next heartbeat, and until then the database counts their lanes
// short.
func (p *Provider) ServerChange() (at time.Time, why string) {
	p.serverMu.Lock()
	defer p.serverMu.Unlock()
	return p.serverChanged, p.changeWhy
}
