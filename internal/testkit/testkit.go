// Package testkit holds what end-to-end tests share: the test database, a
// fresh schema per test, the qd binary built once per test process, and
// daemons started from a config and stopped with signals.
package testkit

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/qd-run/qd/lease"
)

// DefaultDatabaseURL is used when QD_TEST_DATABASE_URL is unset.
const DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var schemaSeq atomic.Int64

// MustDatabaseURL returns the test database URL. When the database cannot be
// reached the test fails under CI (CI=true) and is skipped elsewhere, or
// where QD_TEST_SKIP_DB=1 says to skip (scripts/test.sh lists the skips).
func MustDatabaseURL(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv("QD_TEST_DATABASE_URL")
	if u == "" {
		u = DefaultDatabaseURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, u)
	if err == nil {
		err = pool.Ping(ctx)
		pool.Close()
	}
	if err != nil {
		if os.Getenv("CI") == "true" && os.Getenv("QD_TEST_SKIP_DB") != "1" {
			tb.Fatalf("connect to test database %s: %v", lease.Redact(u), err)
		}
		tb.Skipf("test database %s unreachable: %v", lease.Redact(u), err)
	}
	return u
}

// NewSchema names a fresh schema (not created yet: qd migrate creates it)
// on the database at base, and returns a URL selecting it with the extra
// query parameters, and a function that drops it. It is the one way tests
// get a schema of their own; MustSchema is its usual form.
func NewSchema(base string, extra url.Values) (u, schema string, drop func() error, err error) {
	schema = fmt.Sprintf("qdtest_%d_%d", os.Getpid(), schemaSeq.Add(1))
	parsed, err := url.Parse(base)
	if err != nil {
		return "", "", nil, fmt.Errorf("parse test database url: %w", err)
	}
	q := parsed.Query()
	q.Set("schema", schema)
	for k, vs := range extra {
		for _, v := range vs {
			q.Add(k, v)
		}
	}
	parsed.RawQuery = q.Encode()
	drop = func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pool, err := pgxpool.New(ctx, base)
		if err != nil {
			return fmt.Errorf("drop schema %s: %w", schema, err)
		}
		defer pool.Close()
		// A session the test left behind (a killed daemon's backend still
		// finishing its transaction) may take the schema's locks in
		// another order than DROP does; the deadlock that follows is
		// resolved by trying again once that session is done.
		for try := 1; ; try++ {
			_, err := pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			var pgErr *pgconn.PgError
			if err == nil {
				return nil
			}
			if !errors.As(err, &pgErr) || pgErr.Code != "40P01" || try == 5 {
				return fmt.Errorf("drop schema %s: %w", schema, err)
			}
			time.Sleep(time.Duration(try) * 200 * time.Millisecond)
		}
	}
	return parsed.String(), schema, drop, nil
}

// MustSchema returns the test database URL with a fresh schema of its own
// (not yet migrated) and extra query parameters, and the schema's name; the
// schema is dropped when the test ends.
func MustSchema(tb testing.TB, extra ...url.Values) (string, string) {
	tb.Helper()
	var params url.Values
	if len(extra) > 0 {
		params = extra[0]
	}
	u, schema, drop, err := NewSchema(MustDatabaseURL(tb), params)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("%v", err)
		}
	})
	return u, schema
}

// MustPool opens a pool on the test database (without the schema
// parameter) and closes it when the test ends.
func MustPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	u := MustDatabaseURL(tb)
	pool, err := pgxpool.New(context.Background(), u)
	if err != nil {
		tb.Fatalf("open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}

// MustShortDir makes a directory named after prefix under the system's
// temporary directory and removes it when the test ends. Its paths are
// short, unlike t.TempDir's: a unix socket path must fit in 104 bytes.
func MustShortDir(tb testing.TB, prefix string) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Binary is a program of this module, built once per test process on
// first use.
type Binary struct {
	Pkg  string // its import path
	Race bool   // built with the race detector when the tests run with it
	Tags string // build tags, as go build -tags takes them

	once sync.Once
	path string
	err  error
}

// Must builds the program on first use and returns its path.
func (b *Binary) Must(tb testing.TB) string {
	tb.Helper()
	b.once.Do(func() {
		name := path.Base(b.Pkg)
		dir, err := os.MkdirTemp("", "qd-"+name+"-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		args := []string{"build", "-o", b.path}
		if b.Race && raceEnabled {
			args = append(args, "-race")
		}
		if b.Tags != "" {
			args = append(args, "-tags", b.Tags)
		}
		cmd := exec.Command("go", append(args, b.Pkg)...)
		cmd.Dir = moduleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		tb.Fatal(b.err)
	}
	return b.path
}

// Remove deletes what Must built, if anything. Call it from TestMain after
// m.Run: each test process builds its own (tens of MB).
func (b *Binary) Remove() {
	if b.path != "" {
		os.RemoveAll(filepath.Dir(b.path))
	}
}

// qdBinary is the qd command, with its test-only hooks (the tag
// qdtesthooks: see daemon's testClockSkewEnv).
var qdBinary = &Binary{Pkg: "github.com/qd-run/qd/cmd/qd", Race: true, Tags: "qdtesthooks"}

// MustBuild builds the qd binary once per test process (with the race
// detector when the tests run with it) and returns its path.
func MustBuild(tb testing.TB) string {
	tb.Helper()
	return qdBinary.Must(tb)
}

// RemoveBuild deletes the binary MustBuild built, if any. Call it from
// TestMain after m.Run.
func RemoveBuild() { qdBinary.Remove() }

func moduleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Root returns the repository's root directory.
func Root() string { return moduleRoot() }

// Environ is the environment for the qd binary: this process's, and, unless
// GORACE is set, no pause at exit in a binary built with the race detector
// (its default second would slow every command a test runs).
func Environ() []string {
	env := os.Environ()
	if os.Getenv("GORACE") == "" {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	return env
}

// QD runs the qd binary with args and the database URL in its environment
// and returns its stdout, stderr and exit code.
func QD(tb testing.TB, bin, dbURL string, args ...string) (string, string, int) {
	tb.Helper()
	return QDStdin(tb, bin, dbURL, "", args...)
}

// QDStdin is QD with stdin.
func QDStdin(tb testing.TB, bin, dbURL, stdin string, args ...string) (string, string, int) {
	tb.Helper()
	return runQD(tb, 0, bin, dbURL, stdin, args)
}

// QDWithin is QD with a deadline: qd is killed when it has not exited
// within timeout, and the test fails.
func QDWithin(tb testing.TB, timeout time.Duration, bin, dbURL string, args ...string) (string, string, int) {
	tb.Helper()
	return runQD(tb, timeout, bin, dbURL, "", args)
}

// runQD runs the qd binary with args, stdin, the database URL in its
// environment and no config file, killing it after timeout unless that is
// zero, and returns its stdout, stderr and exit code.
func runQD(tb testing.TB, timeout time.Duration, bin, dbURL, stdin string, args []string) (string, string, int) {
	tb.Helper()
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(Environ(), "QD_DATABASE_URL="+dbURL, "QD_CONFIG=/nonexistent/qd.hcl")
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		tb.Fatalf("qd %s: still running after %s\n%s%s", strings.Join(args, " "), timeout, out.String(), errb.String())
	}
	code := 0
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			tb.Fatalf("run qd %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return out.String(), errb.String(), code
}

// MustQD runs qd and fails the test unless it exits 0; it returns stdout
// without its trailing newline.
func MustQD(tb testing.TB, bin, dbURL string, args ...string) string {
	tb.Helper()
	out, errOut, code := QD(tb, bin, dbURL, args...)
	if code != 0 {
		tb.Fatalf("qd %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return strings.TrimSpace(out)
}

// MustScript writes an executable shell script named name into dir.
func MustScript(tb testing.TB, dir, name, body string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		tb.Fatalf("write script: %v", err)
	}
	return path
}

// MustQueue builds qd and gives it a fresh, migrated schema: it returns the
// binary's path and the database URL naming the schema.
func MustQueue(tb testing.TB) (string, string) {
	tb.Helper()
	bin := MustBuild(tb)
	db, _ := MustSchema(tb)
	MustQD(tb, bin, db, "migrate")
	return bin, db
}
