package pg

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed functions/*.sql
var functionFS embed.FS

// function is the current definition of one SQL function: a single
// CREATE OR REPLACE FUNCTION statement in functions/NAME.sql.
type function struct {
	name string
	sql  string
}

// functions returns the embedded function definitions in name order.
func functions() []function {
	files, err := fs.Glob(functionFS, "functions/*.sql")
	if err != nil {
		panic(err)
	}
	fns := make([]function, 0, len(files))
	for _, f := range files {
		b, err := functionFS.ReadFile(f)
		if err != nil {
			panic(err)
		}
		fns = append(fns, function{name: strings.TrimSuffix(path.Base(f), ".sql"), sql: string(b)})
	}
	return fns
}

// createFunctions creates or replaces every function, in the transaction
// that applied the pending migrations. CREATE OR REPLACE keeps a function's
// grants, but cannot change its result type, OUT parameters or parameter
// names: the migration that changes one of those drops the old function
// first, as 004 drops the old abandon_owner.
func (p *Provider) createFunctions(ctx context.Context, tx pgx.Tx) error {
	for _, f := range functions() {
		_, err := tx.Exec(ctx, expand(f.sql, p.q))
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "42P13" {
			return fmt.Errorf("migrate %s: create function %s: %w; the migration that changes it must drop it first", p.schema, f.name, err)
		}
		if err != nil {
			return fmt.Errorf("migrate %s: create function %s: %w", p.schema, f.name, err)
		}
	}
	return nil
}
