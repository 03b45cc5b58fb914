package localpg

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestMain lets the test binary stand in for a qd process that starts the
// cluster: with QD_LOCALPG_HELPER=DIR it calls Start on DIR, prints the
// Result as JSON and exits.
func TestMain(m *testing.M) {
	if dir := os.Getenv("QD_LOCALPG_HELPER"); dir != "" {
		os.Exit(helper(dir))
	}
	os.Exit(m.Run())
}

func helper(dir string) int {
	c := New(dir, Options{Setup: countSetup(dir)})
	r, err := c.Start(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(r)
	return 0
}

// countSetup is a Setup that adds a line to DIR/setups each time it runs.
func countSetup(dir string) func(context.Context, string) error {
	return func(context.Context, string) error {
		f, err := os.OpenFile(filepath.Join(dir, "setups"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.WriteString("setup\n")
		return err
	}
}

// MustBinaries skips the test when this machine has no PostgreSQL server
// binaries, and fails it under CI (CI=true), where a skip proves nothing.
func MustBinaries(tb testing.TB) {
	tb.Helper()
	if _, err := defaultSearch(os.Getenv).find(""); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
}

// MustDir returns a new short directory (socket paths are short) that the
// owner of a cluster made by root can pass through, removed at the end.
func MustDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "qpg")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// MustCluster returns the cluster in dir/pg and stops its server (pg_ctl
// stop -m immediate) when the test ends, whatever the test started.
func MustCluster(tb testing.TB, dir string, o Options) *Cluster {
	tb.Helper()
	MustBinaries(tb)
	c := New(filepath.Join(dir, "pg"), o)
	tb.Cleanup(func() { MustStop(tb, c) })
	return c
}

// MustStop stops the cluster's server at once; when pg_ctl cannot, it kills
// the postmaster, so that no test leaves a server behind.
func MustStop(tb testing.TB, c *Cluster) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := c.Stop(ctx, Immediate); err != nil {
		tb.Errorf("stop %s: %v", c.Dir(), err)
		if pf, err := readPIDFile(c.dataDir()); err == nil {
			syscall.Kill(pf.pid, syscall.SIGKILL)
		}
	}
}

func MustStart(tb testing.TB, c *Cluster) Result {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := c.Start(ctx)
	if err != nil {
		tb.Fatalf("Start: %v", err)
	}
	return r
}

func MustConnect(tb testing.TB, url string) *pgx.Conn {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		tb.Fatalf("connect to %s: %v", url, err)
	}
	tb.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func MustQuery(tb testing.TB, conn *pgx.Conn, sql string) string {
	tb.Helper()
	var s string
	if err := conn.QueryRow(context.Background(), sql).Scan(&s); err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
	return s
}

// wantOwner is the user a cluster made by this process belongs to.
func wantOwner(tb testing.TB) string {
	tb.Helper()
	if os.Geteuid() == 0 {
		return SystemUser
	}
	u, err := user.Current()
	if err != nil {
		tb.Fatal(err)
	}
	return u.Username
}

// Ensure the first Start makes the cluster (UTF8, C locale, fsync on, the
// socket alone, database qd) and starts it, a second one reuses it, and
// its data survive a stop and a start.
func TestCluster_Start(t *testing.T) {
	t.Parallel()
	dir := MustDir(t)
	c := MustCluster(t, dir, Options{})

	t0 := time.Now()
	r := MustStart(t, c)
	t.Logf("first start (initdb, database qd, pg_ctl start): %s", time.Since(t0).Round(time.Millisecond))
	if !r.Created || !r.Started || r.Version == "" {
		t.Errorf("first Start = %+v, want Created, Started and a version", r)
	}
	conn := MustConnect(t, r.URL)
	for sql, want := range map[string]string{
		"SHOW listen_addresses":                        "",
		"SHOW server_encoding":                         "UTF8",
		"SHOW lc_collate":                              "C",
		"SHOW fsync":                                   "on",
		"SHOW unix_socket_directories":                 c.Dir(),
		"SELECT current_database()":                    Database,
		"SELECT current_user":                          wantOwner(t),
		"SELECT count(*)::text FROM pg_hba_file_rules": "1",
	} {
		if got := MustQuery(t, conn, sql); got != want {
			t.Errorf("%s = %q, want %q", sql, got, want)
		}
	}
	if _, err := conn.Exec(context.Background(), "CREATE TABLE kept (v text); INSERT INTO kept VALUES ('here')"); err != nil {
		t.Fatal(err)
	}
	conn.Close(context.Background())

	t.Run("Reuse", func(t *testing.T) {
		// Ensure a second Start, from a new Cluster as a new process would
		// make, starts nothing and answers at once.
		t0 := time.Now()
		again := MustStart(t, New(c.Dir(), Options{}))
		took := time.Since(t0)
		t.Logf("reuse: %s", took.Round(time.Microsecond))
		if again.Created || again.Started || again.URL != r.URL {
			t.Errorf("second Start = %+v, want the URL %s and nothing done", again, r.URL)
		}
		if took > time.Second {
			t.Errorf("reuse took %s", took)
		}
	})
	t.Run("Status", func(t *testing.T) {
		// Ensure Status tells where the running cluster lives and how to reach it.
		s := c.Status()
		if !s.Created || !s.Running || s.PID == 0 || s.URL != r.URL || s.Size == 0 || s.Owner != wantOwner(t) || s.DataVersion == "" || s.BinDir == "" {
			t.Errorf("Status = %+v", s)
		}
	})
	t.Run("StopStart", func(t *testing.T) {
		// Ensure Stop stops it once, and the next Start finds the data.
		for i, want := range []bool{true, false} {
			if stopped, err := c.Stop(context.Background(), Fast); err != nil || stopped != want {
				t.Fatalf("Stop #%d = %v, %v; want %v", i+1, stopped, err, want)
			}
		}
		if s := c.Status(); s.Running || !s.Created {
			t.Errorf("Status after Stop = %+v, want created and not running", s)
		}
		again := MustStart(t, c)
		if again.Created || !again.Started {
			t.Errorf("Start after Stop = %+v, want Started only", again)
		}
		if got := MustQuery(t, MustConnect(t, again.URL), "SELECT v FROM kept"); got != "here" {
			t.Errorf("after a restart the table holds %q", got)
		}
	})
}

// Ensure five processes starting a cluster that does not exist yet make
// and start it exactly once, run Setup once, and all get its URL.
func TestCluster_ConcurrentFirstUse(t *testing.T) {
	t.Parallel()
	dir := MustDir(t)
	c := MustCluster(t, dir, Options{})
	const n = 5
	type done struct {
		r   Result
		err error
	}
	results := make(chan done, n)
	for range n {
		go func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), "QD_LOCALPG_HELPER="+c.Dir())
			out, err := cmd.Output()
			var d done
			if err != nil {
				d.err = fmt.Errorf("%v: %s", err, errOutput(err))
			} else {
				d.err = json.Unmarshal(out, &d.r)
			}
			results <- d
		}()
	}
	var created, started int
	urls := map[string]bool{}
	for range n {
		d := <-results
		if d.err != nil {
			t.Errorf("a process failed: %v", d.err)
			continue
		}
		created += btoi(d.r.Created)
		started += btoi(d.r.Started)
		urls[d.r.URL] = true
	}
	if created != 1 || started != 1 || len(urls) != 1 {
		t.Errorf("%d processes: %d created, %d started, URLs %v; want 1, 1 and one URL", n, created, started, urls)
	}
	b, _ := os.ReadFile(filepath.Join(c.Dir(), "setups"))
	if got := strings.Count(string(b), "setup"); got != 1 {
		t.Errorf("Setup ran %d times, want 1", got)
	}
}

func errOutput(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return strings.TrimSpace(string(ee.Stderr))
	}
	return ""
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
