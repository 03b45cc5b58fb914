package pg

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/qd-run/qd/lease"
)

// Daemon is one row of the daemons table: the daemon that holds a name.
type Daemon = lease.DaemonRecord

const daemonColumns = `name, instance, host, pid, boot_id, proc_start, state_dir, socket, version,
	started_at, seen_at, clock_timestamp() - seen_at, agents`

func scanDaemon(row pgx.Row) (Daemon, error) {
	var d Daemon
	var start int64
	err := row.Scan(&d.Name, &d.Instance, &d.Host, &d.PID, &d.BootID, &start, &d.StateDir, &d.Socket,
		&d.Version, &d.StartedAt, &d.SeenAt, &d.SeenAgo, &d.Agents)
	d.ProcStart = uint64(start)
	return d, err
}

// ClaimName records d as the daemon that holds d.Name. It succeeds when the
// name is free, already d's, held by the instance takeOver (one its caller
// proved gone), or held by a daemon not seen for longer than stale. Otherwise
// it changes nothing and returns the holder with ok false.
func (p *Provider) ClaimName(ctx context.Context, d Daemon, takeOver string, stale time.Duration) (holder Daemon, ok bool, err error) {
	err = p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`INSERT INTO {{schema}}.daemons AS d
				(name, instance, host, pid, boot_id, proc_start, state_dir, socket, version, agents)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $12)
			ON CONFLICT (name) DO UPDATE SET instance = excluded.instance, host = excluded.host,
				pid = excluded.pid, boot_id = excluded.boot_id, proc_start = excluded.proc_start,
				state_dir = excluded.state_dir, socket = excluded.socket, version = excluded.version,
				agents = excluded.agents,
				started_at = clock_timestamp(), seen_at = clock_timestamp()
			WHERE d.instance IN (excluded.instance, $10) OR d.seen_at < clock_timestamp() - $11::interval`),
			d.Name, d.Instance, d.Host, d.PID, d.BootID, int64(d.ProcStart), d.StateDir, d.Socket, d.Version,
			takeOver, stale, nonNil(d.Agents))
		b.Queue(p.sql(`SELECT `+daemonColumns+` FROM {{schema}}.daemons WHERE name = $1`), d.Name).
			QueryRow(func(row pgx.Row) error {
				var err error
				holder, err = scanDaemon(row)
				return err
			})
	})
	if err != nil {
		return Daemon{}, false, fmt.Errorf("claim daemon name %q: %w", d.Name, mapErr(err))
	}
	return holder, holder.Instance == d.Instance, nil
}

// TouchName tells that instance still holds name and runs agents; ok is
// false when another daemon has taken the name over. The update rides on
// the next claim's transaction when one comes within a couple of seconds
// (rider.go).
func (p *Provider) TouchName(ctx context.Context, name, instance string, agents []string) (ok bool, err error) {
	if err := p.checkSchema(ctx); err != nil {
		return false, fmt.Errorf("touch daemon name %q: %w", name, mapErr(err))
	}
	tag, err := p.ride(ctx, p.sql(`UPDATE {{schema}}.daemons SET seen_at = clock_timestamp(), agents = $3
		WHERE name = $1 AND instance = $2`), name, instance, nonNil(agents))
	if err != nil {
		return false, fmt.Errorf("touch daemon name %q: %w", name, mapErr(err))
	}
	return tag.RowsAffected() == 1, nil
}

// ReleaseName gives up name if instance holds it.
func (p *Provider) ReleaseName(ctx context.Context, name, instance string) error {
	err := p.inTx(ctx, func(b *pgx.Batch) {
		b.Queue(p.sql(`DELETE FROM {{schema}}.daemons WHERE name = $1 AND instance = $2`), name, instance)
	})
	if err != nil {
		return fmt.Errorf("release daemon name %q: %w", name, mapErr(err))
	}
	return nil
}

// Daemons lists the daemons that hold a name, by name.
func (p *Provider) Daemons(ctx context.Context) ([]Daemon, error) {
	rows, err := p.query(ctx, p.sql(`SELECT `+daemonColumns+` FROM {{schema}}.daemons ORDER BY name`))
	if err != nil {
		return nil, fmt.Errorf("list daemons: %w", mapErr(err))
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Daemon, error) { return scanDaemon(row) })
	if err != nil {
		return nil, fmt.Errorf("list daemons: %w", mapErr(err))
	}
	return ds, nil
}

func nonNil(xs []string) []string {
	if xs == nil {
		return []string{}
	}
	return xs
}

// Unserved is a count of queued tasks of an agent that no living daemon
// runs.
type Unserved = lease.UnservedAgent

// UnservedAgents counts the queued tasks whose agent no daemon seen within
// stale runs: they wait for a daemon that may never come.
func (p *Provider) UnservedAgents(ctx context.Context, stale time.Duration) ([]Unserved, error) {
	rows, err := p.query(ctx, p.sql(`SELECT t.agent, count(*) FROM {{schema}}.tasks t
		WHERE t.state = 'queued' AND NOT EXISTS (SELECT 1 FROM {{schema}}.daemons d
			WHERE d.seen_at > clock_timestamp() - $1::interval AND t.agent = ANY (d.agents))
		GROUP BY t.agent ORDER BY t.agent`), stale)
	if err != nil {
		return nil, fmt.Errorf("count unserved tasks: %w", mapErr(err))
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Unserved, error) {
		var u Unserved
		return u, row.Scan(&u.Agent, &u.Queued)
	})
	if err != nil {
		return nil, fmt.Errorf("count unserved tasks: %w", mapErr(err))
	}
	return out, nil
}
