package pg

import (
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/lease"
)

// Ensure pooler=MODE on a database URL sets the query mode a pooler needs,
// keeps a mode the URL names, refuses the modes that cannot work, and is
// never passed on to the server.
func TestPooler_URL(t *testing.T) {
	tests := []struct {
		name, url string
		mode      pgx.QueryExecMode
		err       string // a part of the refusal, "" for none
	}{
		{"none", "postgres://u@h/db", pgx.QueryExecModeCacheStatement, ""},
		{"session", "postgres://u@h/db?pooler=session", pgx.QueryExecModeCacheStatement, ""},
		{"transaction", "postgres://u@h/db?pooler=transaction&schema=q", pgx.QueryExecModeCacheDescribe, ""},
		{"transaction exec", "postgres://u@h/db?default_query_exec_mode=exec&pooler=transaction", pgx.QueryExecModeExec, ""},
		{"transaction simple", "postgres://u@h/db?pooler=transaction&default_query_exec_mode=simple_protocol", pgx.QueryExecModeSimpleProtocol, ""},
		{"transaction cache_statement", "postgres://u@h/db?pooler=transaction&default_query_exec_mode=cache_statement", 0, "named prepared statements"},
		{"statement", "postgres://u@h/db?pooler=statement", 0, "statement pooling cannot carry"},
		{"unknown", "postgres://u@h/db?pooler=yes", 0, "want transaction, session or nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			connURL, own, err := splitParams(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(connURL, "pooler") || strings.Contains(connURL, "schema") {
				t.Errorf("url for pgx %q still holds qd's own parameters", connURL)
			}
			cfg, err := pgxpool.ParseConfig(connURL)
			if err != nil {
				t.Fatal(err)
			}
			err = setPooler(cfg, own["pooler"], connURL)
			if tt.err != "" {
				if err == nil || !errors.Is(err, lease.ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
					t.Errorf("got %v, want ErrInvalid saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.ConnConfig.DefaultQueryExecMode; got != tt.mode {
				t.Errorf("query mode %v, want %v", got, tt.mode)
			}
		})
	}
}

// Ensure the error of a named prepared statement gone astray says what to
// add to the URL, and other errors are left alone.
func TestPooler_Hint(t *testing.T) {
	stray := &pgconn.PgError{Code: "42P05", Message: `prepared statement "stmtcache_ab12" already exists`}
	if got := mapErr(stray).Error(); !strings.Contains(got, "pooler=transaction") {
		t.Errorf("mapErr(%v) = %q, want the pooler hint", stray, got)
	}
	other := &pgconn.PgError{Code: "26000", Message: `prepared statement "mine" does not exist`}
	if got := mapErr(other).Error(); strings.Contains(got, "pooler") {
		t.Errorf("mapErr(%v) = %q, want no pooler hint", other, got)
	}
}
