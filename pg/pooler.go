package pg

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/lease"
)

// Behind a pooler. qd holds nothing in a session across transactions: its
// advisory locks are transaction locks (pg_advisory_xact_lock), it never
// LISTENs, never sets search_path (every name is schema-qualified), makes
// no temporary tables, and the settings it changes are a function's own
// (SET enable_seqscan in its definition), a transaction's
// (set_config(..., true)) or, except behind a transaction-mode pooler, the
// read pool's statement_timeout (readConfig). The one session feature it would use is pgx's
// default, named prepared statements, which a transaction-mode pooler
// (PgBouncer before 1.21) hands to whichever server connection the next
// transaction gets. pooler=transaction on the URL swaps them for cached
// statement descriptions and unnamed statements (default_query_exec_mode
// cache_describe), one round trip each still.

// poolerHint is added to the errors of named prepared statements gone
// astray, the sign of a transaction-mode pooler that qd was not told of.
const poolerHint = "behind a transaction-mode pooler (PgBouncer)? add pooler=transaction to the database URL"

// setPooler configures cfg for the pooler mode named on the URL: "" or
// session (nothing to change), transaction (no named prepared
// statements), or statement (refused: a claim is a transaction).
func setPooler(cfg *pgxpool.Config, mode, connURL string) error {
	switch mode {
	case "", "session":
		return nil
	case "transaction":
	case "statement":
		return fmt.Errorf("%w: pooler=statement: qd needs transactions (a claim is one), which statement pooling cannot carry; use transaction or session pooling", lease.ErrInvalid)
	default:
		return fmt.Errorf("%w: pooler=%s: want transaction, session or nothing", lease.ErrInvalid, mode)
	}
	asked := queryParam(connURL, "default_query_exec_mode")
	switch asked {
	case "":
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	case "cache_statement":
		return fmt.Errorf("%w: pooler=transaction with default_query_exec_mode=cache_statement: named prepared statements do not survive from one transaction to the next behind a transaction-mode pooler; leave the mode out (qd uses cache_describe) or use exec or simple_protocol", lease.ErrInvalid)
	}
	return nil
}

// queryParam returns the value of one parameter of a URL, "" if absent.
func queryParam(rawURL, key string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return ""
	}
	return u.Query().Get(key)
}

// withPoolerHint adds poolerHint to an error about pgx's named prepared
// statements (already exists, or does not exist).
func withPoolerHint(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P05" || pgErr.Code == "26000") && strings.Contains(pgErr.Message, "stmtcache_") {
		return fmt.Errorf("%w (%s)", err, poolerHint)
	}
	return err
}
