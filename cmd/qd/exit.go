package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

// Exit codes, part of the CLI contract.
const (
	ExitOK        = 0
	ExitFailure   = 1
	ExitUsage     = 2
	ExitNoWork    = 3
	ExitLeaseLost = 4
)

// ExitError is an error that decides the process's exit code.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// usageErrorf reports bad usage: exit code 2.
func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// invalidText is the message of an error matching lease.ErrInvalid without
// the sentinel's own words, for a usage error that names the flag.
func invalidText(err error) string {
	return strings.TrimPrefix(err.Error(), lease.ErrInvalid.Error()+": ")
}

// errQuiet ends a command with its exit code and no message, for commands
// that already explained themselves.
var errQuiet = errors.New("quiet")

// exitCode maps an error to the process's exit code.
func exitCode(err error) int {
	var ee *ExitError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.Code
	case errors.Is(err, lease.ErrNoWork):
		return ExitNoWork
	case errors.Is(err, lease.ErrLeaseLost):
		return ExitLeaseLost
	case errors.Is(err, lease.ErrInvalid):
		return ExitUsage
	case errors.Is(err, api.ErrRefused):
		// A well-formed request the daemon will not let this caller make
		// (a run acting on another run): an error, not a usage mistake.
		return ExitFailure
	}
	return ExitFailure
}

// suggest returns the name closest to s by edit distance, or "" when none is
// close enough to be a likely typo.
func suggest(s string, names []string) string {
	return closest(s, names, len(s)/2+2)
}

// suggestFlag returns the flag name s likely meant: the one name it begins,
// else the closest within a third of its length (flags are short, and a
// wrong guess is worse than none), or "".
func suggestFlag(s string, names []string) string {
	var begun []string
	for _, n := range names {
		if strings.HasPrefix(n, s) {
			begun = append(begun, n)
		}
	}
	if len(begun) == 1 {
		return begun[0]
	}
	return closest(s, names, max(1, len(s)/3)+1)
}

// closest returns the name nearest to s by edit distance if it is nearer
// than bound, else "".
func closest(s string, names []string, bound int) string {
	best, bestDist := "", bound
	for _, n := range names {
		if d := editDistance(s, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// editDistance counts the insertions, deletions, substitutions and swaps of
// adjacent letters that turn a into b (optimal string alignment distance).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}
