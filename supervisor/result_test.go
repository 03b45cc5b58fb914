package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
)

// Ensure a child's result, from the file $QD_RESULT names or from the
// socket, is its task's once it exits 0; a file that is not JSON fails
// the run saying why; and a child that waited for tasks reads their
// results from $QD_PARENT_RESULTS.
func TestSupervisor_Result(t *testing.T) {
	t.Run("File", func(t *testing.T) {
		// Ensure the file's JSON is stored byte for byte.
		h := MustHarness(t, nil)
		l := h.start(`printf '{"found": 3}\n' > "$QD_RESULT"`, "{}", Spec{})
		if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
			t.Fatalf("run %s: %q", r.State, r.Summary)
		}
		if got := string(h.task(l.TaskID).Result); got != `{"found": 3}` {
			t.Errorf("result: got %q", got)
		}
		h.waitGone()
		if left, _ := os.ReadDir(sharedResults(h.state)); len(left) > 0 {
			t.Errorf("result file left behind in %s: %v", sharedResults(h.state), left)
		}
	})
	t.Run("Socket", func(t *testing.T) {
		// Ensure a result sent while it runs is stored with its completion.
		h := MustHarness(t, nil)
		l := h.start("sleep 0.3", "{}", Spec{})
		if err := h.s.SetResult(l.RunID, []byte(` [1, 2] `)); err != nil {
			t.Fatal(err)
		}
		if err := h.s.SetResult(l.RunID, []byte(`{`)); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("a result that is not JSON: got %v, want ErrInvalid", err)
		}
		if err := h.s.SetResult(l.RunID+99, []byte(`1`)); !errors.Is(err, ErrUnknownRun) {
			t.Errorf("a result for a run it does not run: got %v, want ErrUnknownRun", err)
		}
		h.waitRun(l.RunID)
		if got := string(h.task(l.TaskID).Result); got != `[1, 2]` {
			t.Errorf("result: got %q", got)
		}
	})
	t.Run("NotJSON", func(t *testing.T) {
		// Ensure a result file that is not JSON fails the run, and says so.
		h := MustHarness(t, nil)
		l := h.start(`echo nope > "$QD_RESULT"`, "{}", Spec{})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunFailed || !strings.Contains(r.Summary, "QD_RESULT") || !strings.Contains(r.Summary, "not valid JSON") {
			t.Errorf("run with a bad result file: %s, %q; want failed, naming $QD_RESULT", r.State, r.Summary)
		}
	})
	t.Run("StaleFile", func(t *testing.T) {
		// Ensure a result file left under the run's id by an earlier
		// daemon is not taken as the result of a run that wrote none.
		h := MustHarness(t, nil)
		if err := os.MkdirAll(sharedResults(h.state), 0o700); err != nil {
			t.Fatal(err)
		}
		for id := 1; id <= 50; id++ {
			if err := os.WriteFile(filepath.Join(sharedResults(h.state), fmt.Sprintf("%d.result.json", id)), []byte(`{"stale": true}`), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		l := h.start("true", "{}", Spec{})
		if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
			t.Fatalf("run %s: %q", r.State, r.Summary)
		}
		if l.RunID > 50 {
			t.Fatalf("run id %d is past the stale files; the test proves nothing", l.RunID)
		}
		if got := h.task(l.TaskID).Result; got != nil {
			t.Errorf("result of a run that wrote none: %q, the stale file's", got)
		}
	})
	t.Run("Failed", func(t *testing.T) {
		// Ensure a run that fails keeps no result, and leaves no file.
		h := MustHarness(t, nil)
		l := h.start(`echo '{"x":1}' > "$QD_RESULT"; exit 1`, "{}", Spec{})
		h.waitRun(l.RunID)
		if got := h.task(l.TaskID).Result; got != nil {
			t.Errorf("result of a failed run: got %q, want none", got)
		}
		h.waitGone()
		if left, _ := os.ReadDir(sharedResults(h.state)); len(left) > 0 {
			t.Errorf("a failed run's result file left behind in %s: %v", sharedResults(h.state), left)
		}
	})
	t.Run("Parents", func(t *testing.T) {
		// Ensure the parents' results are in the file $QD_PARENT_RESULTS
		// names, and the run's results directory is gone after it.
		h := MustHarness(t, nil)
		out := filepath.Join(t.TempDir(), "parents")
		want := `{"1":{"a":1},"2":null}`
		l := h.start(`cat "$QD_PARENT_RESULTS" > `+out, "{}", Spec{ParentResults: []byte(want)})
		h.waitRun(l.RunID)
		h.waitGone()
		if got, err := os.ReadFile(out); err != nil || string(got) != want {
			t.Errorf("$QD_PARENT_RESULTS held %q, %v; want %q", got, err, want)
		}
		if _, err := os.Stat(resultsDir(h.state, l.RunID)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("results directory left behind: %v", err)
		}
		if left, _ := os.ReadDir(sharedResults(h.state)); len(left) > 0 {
			t.Errorf("result files left behind in %s: %v", sharedResults(h.state), left)
		}
	})
}
