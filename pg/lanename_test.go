package pg_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qd-run/qd/lease"
)

// Ensure the lanes table's CHECK accepts exactly the names lease.ValidName
// accepts, and spells lease.LanePattern: Go refuses a bad name before the
// database sees it, and the CHECK refuses one written with psql.
func TestLaneName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"a", true},
		{"0", true},
		{"default", true},
		{"lane-1", true},
		{"x.y_z", true},
		{"a-", true},
		{"a..b", true},
		{strings.Repeat("a", 63), true},
		{strings.Repeat("a", 64), false},
		{"", false},
		{"-a", false},
		{".a", false},
		{"_a", false},
		{"A", false},
		{"aB", false},
		{"a b", false},
		{"a/b", false},
		{"a:b", false},
		{"a\n", false},
		{"\na", false},
		{"a\nb", false},
		{"é", false},
		{"aé", false},
		{"ａ", false},
		{"a\t", false},
	}
	p := MustOpen(t)
	ctx := context.Background()
	var def string
	err := p.Pool().QueryRow(ctx, `SELECT pg_get_constraintdef(oid) FROM pg_constraint
		WHERE conrelid = $1::text::regclass AND conname = 'lanes_name_check'`, p.Schema()+".lanes").Scan(&def)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(def, "'"+lease.LanePattern+"'") {
		t.Errorf("lanes_name_check is %s, want it to match %s", def, lease.LanePattern)
	}
	for _, tt := range tests {
		if got := lease.ValidName(tt.name); got != tt.want {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.want)
		}
		err := pgx.BeginFunc(ctx, p.Pool(), func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+p.Schema()+".lanes (name) VALUES ($1)", tt.name); err != nil {
				return err
			}
			return errRollback
		})
		var pgErr *pgconn.PgError
		switch {
		case errors.Is(err, errRollback):
			if !tt.want {
				t.Errorf("lanes accepts %q, want the CHECK to refuse it", tt.name)
			}
		case errors.As(err, &pgErr) && pgErr.Code == "23514":
			if tt.want {
				t.Errorf("lanes refuses %q: %v", tt.name, err)
			}
		default:
			t.Fatalf("insert lane %q: %v", tt.name, err)
		}
	}
}

// errRollback ends a transaction that must leave nothing behind.
var errRollback = errors.New("roll back")
