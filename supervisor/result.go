package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/qd-run/qd/lease"
)

// The variables that name a run's result files.
const (
	// ResultEnv names the file a child may write its result to (JSON, at
	// most lease.MaxResultBytes), read when it exits 0.
	ResultEnv = "QD_RESULT"
	// ParentResultsEnv names the file that holds, when a task that waited
	// for others starts, their results: one JSON object keyed by task id.
	ParentResultsEnv = "QD_PARENT_RESULTS"
)

// resultsDir holds, for a run without a fresh workdir that runs as another
// user, a directory of its own for its result files (given to that user,
// removed when the run ends).
func resultsDir(stateDir string, runID int64) string {
	return filepath.Join(stateDir, "results", strconv.FormatInt(runID, 10))
}

// sharedResults is the directory of the result files of the runs without
// a fresh workdir that run as the daemon's own user: one file or two per
// run, named by its id, in one directory made once rather than one made
// and removed per run (which the file system pays for on every start).
func sharedResults(stateDir string) string { return filepath.Join(stateDir, "results") }

// prepareResults chooses where c's result files live: in its fresh
// workdir when it has one (the box and the run's user reach it); for a run
// as another user, in a directory of its own under the state directory,
// given to that user; else in the shared results directory, under names
// of the run's own. It writes the results of the tasks c waited for there.
func (s *Supervisor) prepareResults(c *child) error {
	dir := c.workdir
	result, parents := ".qd-result.json", ".qd-parent-results.json"
	asOther := c.spec.User != nil && os.Geteuid() == 0
	switch {
	case dir != "":
	case asOther:
		dir = resultsDir(s.cfg.StateDir, c.l.RunID)
		if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
			return fmt.Errorf("create the results directory: %w", err)
		}
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create the run's results directory: %w", err)
		}
		if err := os.Chown(dir, c.spec.User.UID, c.spec.User.GID); err != nil {
			return fmt.Errorf("give the run's results directory to user %s: %w", c.spec.User.Name, err)
		}
		c.resultsDir = dir
	default:
		dir = sharedResults(s.cfg.StateDir)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create the results directory: %w", err)
		}
		id := strconv.FormatInt(c.l.RunID, 10)
		result, parents = id+".result.json", id+".parents.json"
		c.sharedResults = true
	}
	c.resultFile = filepath.Join(dir, result)
	if c.sharedResults {
		// A file an earlier daemon left under this run id (it died before
		// removing it, and a restored database gave the id out again) is
		// not this run's result.
		if err := unlink(c.resultFile); err != nil {
			return fmt.Errorf("clear the run's result file: %w", err)
		}
	}
	if c.spec.ParentResults == nil {
		return nil
	}
	c.parentsFile = filepath.Join(dir, parents)
	if err := os.WriteFile(c.parentsFile, c.spec.ParentResults, 0o600); err != nil {
		return fmt.Errorf("write the results of the tasks run %d waited for: %w", c.l.RunID, err)
	}
	if asOther {
		if err := os.Chown(c.parentsFile, c.spec.User.UID, c.spec.User.GID); err != nil {
			return fmt.Errorf("give the parent results file to user %s: %w", c.spec.User.Name, err)
		}
	}
	return nil
}

// SetResult records the result of run runID, sent through the socket; it
// is stored with the run's completion. An error matches lease.ErrInvalid
// for a result that is not JSON or too large, ErrUnknownRun when this
// supervisor does not run the run.
func (s *Supervisor) SetResult(runID int64, result []byte) error {
	result = bytes.TrimSpace(result)
	if err := lease.CheckResult(result); err != nil {
		return err
	}
	s.mu.Lock()
	c := s.children[runID]
	s.mu.Unlock()
	if c == nil {
		return fmt.Errorf("record the result of run %d: %w", runID, ErrUnknownRun)
	}
	c.mu.Lock()
	c.result = bytes.Clone(result)
	c.mu.Unlock()
	return nil
}

// TaskOf is the task of run runID, 0 when this supervisor does not run it.
func (s *Supervisor) TaskOf(runID int64) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.children[runID]; c != nil {
		return c.l.TaskID
	}
	return 0
}

// takeResult gives a completion c's result: the file of $QD_RESULT when
// the child wrote one, else what it sent through the socket. A file that
// is not a result fails the run instead, saying why. It removes the run's
// results directory.
func (s *Supervisor) takeResult(c *child, st *lease.Settlement) {
	defer dropResults(c)
	if st.Outcome != lease.RunCompleted {
		return
	}
	c.mu.Lock()
	st.Result = c.result
	c.mu.Unlock()
	if c.resultFile == "" {
		return
	}
	b, err := readResult(c.resultFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.resultFile = "" // no file: dropResults has none to remove
		return
	case err == nil:
		err = lease.CheckResult(b)
	}
	if err != nil {
		st.Outcome, st.Result = lease.RunFailed, nil
		st.Summary = bound(fmt.Sprintf("exited 0, but its result file ($%s) is refused: %s", ResultEnv, resultText(err)))
		st.RetryIn = lease.Backoff(c.spec.RetryBackoff, c.l.Attempt)
		return
	}
	st.Result = b
}

func readResult(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, lease.MaxResultBytes+2))
	return bytes.TrimSpace(b), err
}

// resultText is err without the sentinel's words.
func resultText(err error) string {
	s := err.Error()
	if p := lease.ErrInvalid.Error() + ": "; len(s) > len(p) && s[:len(p)] == p {
		return s[len(p):]
	}
	return s
}

// dropResults removes c's results directory, when it has one of its own,
// or its files in the shared one.
func dropResults(c *child) {
	if c.resultsDir != "" {
		if err := os.RemoveAll(c.resultsDir); err != nil {
			c.log.Warn("remove the run's results directory", "dir", c.resultsDir, "error", err)
		}
	}
	if !c.sharedResults {
		return
	}
	for _, f := range []string{c.resultFile, c.parentsFile} {
		if f == "" {
			continue
		}
		if err := unlink(f); err != nil {
			c.log.Warn("remove the run's result file", "file", f, "error", err)
		}
	}
}

// unlink removes the file at path, a file that may not exist: one system
// call, where os.Remove tries rmdir after a failed unlink, and these paths
// are cleared at every run's start and end.
func unlink(path string) error {
	for {
		err := syscall.Unlink(path)
		switch {
		case err == nil, errors.Is(err, syscall.ENOENT):
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return &fs.PathError{Op: "unlink", Path: path, Err: err}
	}
}
