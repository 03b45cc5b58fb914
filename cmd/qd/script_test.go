package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"

	"github.com/jackc/pgx/v5"
	"github.com/rogpeppe/go-internal/testscript"
)

// TestMain lets the test binary act as qd: scripts and tests that exec
// "qd" run the real command, through main.
func TestMain(m *testing.M) {
	if os.Getenv("GORACE") == "" {
		// A race-enabled qd would otherwise sleep a second at every exit.
		os.Setenv("GORACE", "atexit_sleep_ms=0")
	}
	testscript.Main(m, map[string]func(){"qd": main})
}

// schemaSeq numbers the schemas this process creates.
var schemaSeq atomic.Int64

// MustTestDB returns the test database URL after checking it answers. It
// fails when CI=true and skips otherwise when the database is down.
func MustTestDB(tb testing.TB) string {
	tb.Helper()
	return testkit.MustDatabaseURL(tb)
}

// Ensure the CLI contract holds against the built binary and a real
// database: each script under testdata/script runs in its own schema.
func TestScripts(t *testing.T) {
	base := MustTestDB(t)
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(e *testscript.Env) error {
			u, _, drop, err := testkit.NewSchema(base, nil)
			if err != nil {
				return err
			}
			e.Setenv("QD_DATABASE_URL", u)
			e.Setenv("QD_TEST_BASE_URL", base)
			e.Setenv("XDG_CONFIG_HOME", e.WorkDir+"/xdg")
			e.Setenv("XDG_STATE_HOME", e.WorkDir+"/xdgstate")
			e.Defer(func() {
				if err := drop(); err != nil {
					t.Log(err)
				}
			})
			db := fmt.Sprintf("qdcli_db_%d_%d", os.Getpid(), schemaSeq.Add(1))
			e.Setenv("QD_TEST_NEWDB", db)
			e.Defer(func() { dropDatabase(t, base, db) })
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"qdexit": cmdQDExit,
		},
	})
}

// cmdQDExit runs "qdexit CODE ARGS..." : qd ARGS must exit with CODE. Its
// stdout and stderr are kept for the next stdout/stderr checks.
func cmdQDExit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 1 {
		ts.Fatalf("usage: qdexit CODE ARGS...")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("qdexit: bad code %q", args[0])
	}
	err = ts.Exec("qd", args[1:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("qd %s: %v", strings.Join(args[1:], " "), err)
	}
	if got != want {
		ts.Logf("stdout:\n%s\nstderr:\n%s", ts.ReadFile("stdout"), ts.ReadFile("stderr"))
		ts.Fatalf("qd %s: exit %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// dropDatabase removes a database a script may have made qd migrate create.
func dropDatabase(tb testing.TB, base, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		tb.Logf("drop database %s: %v", name, err)
		return
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
		tb.Logf("drop database %s: %v", name, err)
	}
}
