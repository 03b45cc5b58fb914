package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return string(b)
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// taskField reads a field of `qd show --json` output, whether the task is
// at the top level or under "task".
func taskField(show map[string]any, key string) string {
	if t, ok := show["task"].(map[string]any); ok {
		return fmt.Sprint(t[key])
	}
	return fmt.Sprint(show[key])
}

// shown is what `qd show TASK --json` prints.
type shown struct {
	Task struct {
		ID          int64  `json:"id"`
		Lane        string `json:"lane"`
		State       string `json:"state"`
		Attempts    int    `json:"attempts"`
		MaxAttempts int    `json:"max_attempts"`
		ParentRun   int64  `json:"parent_run"`
	} `json:"task"`
	Runs []shownRun `json:"runs"`
}

type shownRun struct {
	ID       int64  `json:"id"`
	Attempt  int    `json:"attempt"`
	Owner    string `json:"owner"`
	State    string `json:"state"`
	PID      int    `json:"pid"`
	Summary  string `json:"summary"`
	ExitCode *int   `json:"exit_code"`
	Signal   string `json:"signal"`
}

func showTask(t *testing.T, qd, db, id string) shown {
	t.Helper()
	out := testkit.MustQD(t, qd, db, "show", id, "--json")
	var s shown
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("qd show %s --json: %v\n%s", id, err, out)
	}
	return s
}

// waitShow polls `qd show TASK` until cond holds.
func waitShow(t *testing.T, qd, db, id string, timeout time.Duration, what string, cond func(shown) bool) shown {
	t.Helper()
	var s shown
	deadline := time.Now().Add(timeout)
	for {
		s = showTask(t, qd, db, id)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: timed out after %s waiting for %s; last seen: %+v", id, timeout, what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// runStates lists the states of a task's runs in attempt order.
func runStates(s shown) []string {
	out := make([]string, len(s.Runs))
	for i, r := range s.Runs {
		out[i] = r.State
	}
	return out
}

// readPID waits for an agent to write a pid into path and returns it.
func readPID(t *testing.T, path string, timeout time.Duration) int {
	t.Helper()
	pid := 0
	testkit.Eventually(t, timeout, "a pid in "+path, func() bool {
		b, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		pid = n
		return err == nil && n > 0
	})
	return pid
}

// enqueue adds a task and returns its id.
func enqueue(t *testing.T, qd, db, lane, agent string, more ...string) string {
	t.Helper()
	args := append([]string{"enqueue", "--lane", lane, "--agent", agent}, more...)
	return testkit.MustQD(t, qd, db, append(args, "{}")...)
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatalf("write %s: %v", path, err)
	}
}
