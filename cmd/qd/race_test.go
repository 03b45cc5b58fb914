package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// qdProc runs the qd binary (the test binary, through TestMain) with env
// and returns its stdout and exit code.
func qdProc(tb testing.TB, env []string, args ...string) (string, int) {
	tb.Helper()
	cmd := exec.Command("qd", args...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), ee.ExitCode()
	case err != nil:
		tb.Fatalf("qd %s: %v", strings.Join(args, " "), err)
	}
	return out.String(), 0
}

// MustQD runs qd and fails the test unless it exits 0.
func MustQD(tb testing.TB, env []string, args ...string) string {
	tb.Helper()
	out, code := qdProc(tb, env, args...)
	if code != 0 {
		tb.Fatalf("qd %s: exit %d", strings.Join(args, " "), code)
	}
	return out
}

// Ensure racing qd claim processes never give a lane more live runs than
// its limit, and claim each task exactly once.
func TestClaim_ProcessesRaceLaneLimits(t *testing.T) {
	base := MustTestDB(t)
	u, schema := testkit.MustSchema(t)
	env := []string{"QD_DATABASE_URL=" + u}
	limits := map[string]int{"one": 1, "three": 3}
	perLane := 12
	MustQD(t, env, "migrate")
	for lane, limit := range limits {
		MustQD(t, env, "lane", "set", lane, "--max-running", fmt.Sprint(limit))
		for i := 0; i < perLane; i++ {
			MustQD(t, env, "enqueue", "--lane", lane, "--agent", "a", fmt.Sprintf(`{"i":%d}`, i))
		}
	}

	t.Run("Burst", func(t *testing.T) {
		// Ensure a burst of claimers with nobody completing gets exactly
		// the lane's limit.
		for lane, limit := range limits {
			wins := raceClaims(t, env, 10, lane)
			if len(wins) != limit {
				t.Errorf("lane %s (limit %d): %d of 10 racing claims won", lane, limit, len(wins))
			}
			for _, w := range wins {
				MustQD(t, env, "complete", fmt.Sprint(w.RunID))
			}
		}
	})

	t.Run("Drain", func(t *testing.T) {
		// Ensure workers that claim and complete until the queue is empty,
		// watched by a sampler, never exceed a limit or repeat a task.
		ctx, cancel := context.WithCancel(context.Background())
		samplerDone := make(chan error, 1)
		go func() { samplerDone <- sampleLive(ctx, base, schema, limits) }()
		var mu sync.Mutex
		seen := map[int64]int{}
		var wg sync.WaitGroup
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					c, ok := claimOnce(t, env, "--lane", "one", "--lane", "three")
					if !ok {
						return
					}
					mu.Lock()
					seen[c.TaskID]++
					mu.Unlock()
					if _, code := qdProc(t, env, "complete", fmt.Sprint(c.RunID)); code != 0 {
						t.Errorf("complete run %d: exit %d", c.RunID, code)
					}
				}
			}()
		}
		wg.Wait()
		cancel()
		if err := <-samplerDone; err != nil {
			t.Error(err)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("task %d claimed %d times", id, n)
			}
		}
		claimedBurst := 1 + 3
		if got, want := len(seen), 2*perLane-claimedBurst; got != want {
			t.Errorf("drain claimed %d tasks, want %d", got, want)
		}
	})

	out := MustQD(t, env, "tasks", "--state", "done", "--limit", "1000", "--json")
	var done []api.Task
	if err := json.Unmarshal([]byte(out), &done); err != nil {
		t.Fatal(err)
	}
	if got, want := len(done), 2*perLane; got != want {
		t.Errorf("%d tasks done, want %d", got, want)
	}
}

// raceClaims starts n qd claim processes on lane at once and returns the
// leases of those that won.
func raceClaims(t *testing.T, env []string, n int, lane string) []api.Lease {
	t.Helper()
	var mu sync.Mutex
	var wins []api.Lease
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			c, ok := claimOnce(t, env, "--lane", lane)
			if !ok {
				return
			}
			mu.Lock()
			wins = append(wins, c)
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	return wins
}

// claimOnce runs qd claim with args and returns the lease; ok is false when
// there was no work, or when the claim failed, which it reports.
func claimOnce(t *testing.T, env []string, args ...string) (c api.Lease, ok bool) {
	t.Helper()
	out, code := qdProc(t, env, append([]string{"claim"}, args...)...)
	if code == ExitNoWork {
		return c, false
	}
	if code != 0 || json.Unmarshal([]byte(out), &c) != nil {
		t.Errorf("claim: exit %d, output %q", code, out)
		return c, false
	}
	return c, true
}

// sampleLive reads the live runs per lane from the database until ctx ends
// and reports the first lane seen above its limit.
func sampleLive(ctx context.Context, base, schema string, limits map[string]int) error {
	conn, err := pgx.Connect(context.Background(), base)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	q := fmt.Sprintf(`SELECT t.lane, count(*) FROM %[1]s.runs r JOIN %[1]s.tasks t ON t.id = r.task_id
		WHERE r.state = 'running' AND r.lease_expires_at > clock_timestamp() GROUP BY t.lane`, pgx.Identifier{schema}.Sanitize())
	var samples atomic.Int64
	for ctx.Err() == nil {
		rows, err := conn.Query(context.Background(), q)
		if err != nil {
			return err
		}
		for rows.Next() {
			var lane string
			var n int
			if err := rows.Scan(&lane, &n); err != nil {
				return err
			}
			if n > limits[lane] {
				return fmt.Errorf("lane %s had %d live runs, limit %d", lane, n, limits[lane])
			}
		}
		if err := rows.Err(); err != nil {
			return err
		}
		samples.Add(1)
		time.Sleep(5 * time.Millisecond)
	}
	if samples.Load() == 0 {
		return errors.New("sampler took no samples")
	}
	return nil
}
