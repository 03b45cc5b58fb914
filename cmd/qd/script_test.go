package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/localpg"
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
			e.Setenv("QD_TEST_NEWDB_URL", withDatabase(base, db))
			e.Defer(func() { dropDatabase(t, base, db) })
			return privateState(t, e)
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

// withDatabase is base naming database db instead.
func withDatabase(base, db string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + db
	return u.String()
}

// privateState gives a script a short state directory of its own for a
// private cluster, in $QD_PRIVATE_STATE (scripts set STATE_DIRECTORY to
// it), and stops the cluster a script started there when it ends. The
// directory can be passed through by the cluster's owner when the tests
// run as root.
func privateState(t *testing.T, e *testscript.Env) error {
	dir, err := os.MkdirTemp("", "qds")
	if err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		return err
	}
	e.Setenv("QD_PRIVATE_STATE", dir)
	e.Defer(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := localpg.New(filepath.Join(dir, "pg"), localpg.Options{}).Stop(ctx, localpg.Immediate); err != nil {
			t.Errorf("stop the private cluster of %s: %v", e.WorkDir, err)
		}
		os.RemoveAll(dir)
	})
	return nil
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
