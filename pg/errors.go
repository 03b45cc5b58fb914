package pg

import (
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/qd-run/qd/lease"
)

// mapErr turns driver errors into lease sentinels, keeping the driver's
// text for the reader.
func mapErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return lease.ErrNotFound
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "42P05", "26000":
		return withPoolerHint(err)
	case "22P05", "22021", "22P02", "22023", "23514", "22001":
		// untranslatable character (\u0000), bad encoding, bad input,
		// bad parameter, check violation, value too long.
		return fmt.Errorf("%w: %s", lease.ErrInvalid, pgErr.Message)
	case "23505":
		return fmt.Errorf("%w: %s", lease.ErrConflict, pgErr.Message)
	case "23503":
		return fmt.Errorf("%w: %s", lease.ErrNotFound, pgErr.Message)
	}
	return err
}
