package pg

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"

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
	if unreachable(err) {
		return fmt.Errorf("%w: %w", lease.ErrUnreachable, err)
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
	case "23503", "P0002":
		// foreign key violation, no data found (a limit not declared).
		return fmt.Errorf("%w: %s", lease.ErrNotFound, pgErr.Message)
	}
	return err
}

// unreachable reports whether err says that the server could not be
// reached: a connection refused or cut, a network timeout, a server that
// is shutting down, starting up or gone (SQLSTATE classes 08 and 57P).
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, lease.ErrUnreachable):
		return false // said already
	case errors.As(err, &pgErr):
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "57P")
	case errors.As(err, &ce), errors.As(err, &ne):
		return true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	return false
}
