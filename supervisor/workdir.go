package supervisor

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/qd-run/qd/lease"
)

// When a run's fresh working directory stays after the run
// (Spec.KeepWorkdir); any other value removes it.
const (
	KeepFailed = "failed" // kept when the run did not complete
	KeepAlways = "always"
)

// WorkDir holds the fresh working directories of runs (Spec.Workdir),
// and the socket of the runs of another user (RunsSocketPath).
func WorkDir(stateDir string) string { return filepath.Join(stateDir, "work") }

// WorkPath is the fresh working directory of run id.
func WorkPath(stateDir string, runID int64) string {
	return filepath.Join(WorkDir(stateDir), strconv.FormatInt(runID, 10))
}

// RunsSocketPath is the daemon's socket for the runs of agents that run
// as another user than the daemon's: beside their working directories,
// the one place of the state directory they may reach.
func RunsSocketPath(stateDir string) string { return filepath.Join(WorkDir(stateDir), "qd.sock") }

// OpenWorkDir makes WorkDir, and, for runs of other users (open), lets
// them through the state directory to it: the state directory gains the
// search bit for others (it lists nothing), and WorkDir is mode 0711.
// Every other directory of the state directory stays closed to them, each
// by its own mode (0700); so does each run's working directory.
func OpenWorkDir(stateDir string, open bool) error {
	work := WorkDir(stateDir)
	mode := os.FileMode(0o700)
	if open {
		mode = 0o711
	}
	if err := os.MkdirAll(work, mode); err != nil {
		return fmt.Errorf("create %s: %w", work, err)
	}
	if !open {
		return nil
	}
	for _, d := range []struct {
		path string
		bits os.FileMode
	}{{stateDir, 0o001}, {work, 0o011}} {
		fi, err := os.Stat(d.path)
		if err != nil {
			return fmt.Errorf("open %s to the runs of other users: %w", d.path, err)
		}
		if m := fi.Mode().Perm(); m&d.bits != d.bits {
			if err := os.Chmod(d.path, m|d.bits); err != nil {
				return fmt.Errorf("open %s to the runs of other users: %w", d.path, err)
			}
		}
	}
	return nil
}

// makeWorkdir makes c's fresh working directory, owned by the run's user.
func (s *Supervisor) makeWorkdir(c *child) error {
	u := c.spec.User
	if err := OpenWorkDir(s.cfg.StateDir, u != nil && u.UID != os.Geteuid()); err != nil {
		return err
	}
	path := WorkPath(s.cfg.StateDir, c.l.RunID)
	if err := os.Mkdir(path, 0o700); err != nil {
		return fmt.Errorf("create the run's workdir: %w", err)
	}
	if u != nil {
		if err := os.Chown(path, u.UID, u.GID); err != nil {
			os.Remove(path)
			return fmt.Errorf("give the run's workdir to user %s: %w", u.Name, err)
		}
	}
	c.workdir = path
	return nil
}

// endWorkdir removes c's fresh working directory once nothing of the run
// is left, or keeps it, as the agent's keep_workdir says for a run that
// ended with outcome; a kept one is named at the end of summary.
func (s *Supervisor) endWorkdir(c *child, outcome lease.RunState, summary string) string {
	if c.workdir == "" {
		return summary
	}
	keep := c.spec.KeepWorkdir == KeepAlways || (c.spec.KeepWorkdir == KeepFailed && outcome != lease.RunCompleted)
	if keep {
		c.log.Info("run's workdir kept", "workdir", c.workdir)
		return withNote(summary, "workdir kept at "+c.workdir)
	}
	if err := removeTree(c.workdir); err != nil {
		c.log.Warn("remove the run's workdir", "workdir", c.workdir, "error", err)
	}
	return summary
}

// withNote appends note to summary, shortening summary rather than note
// to keep within bound's length.
func withNote(summary, note string) string {
	const room = 500
	if summary == "" {
		return bound(note)
	}
	if over := len(summary) + len("; ") + len(note) - room; over > 0 {
		summary = clean([]byte(summary[:max(0, len(summary)-over-len("…"))])) + "…"
	}
	return bound(summary + "; " + note)
}

// removeTree removes the directory tree at path. A run of the daemon's
// own user may have taken that user's rights away from directories it
// made (root needs none): where that stops the removal, each directory
// is given back to its owner, then the removal is tried again.
func removeTree(path string) error {
	err := os.RemoveAll(path)
	if err == nil || os.Geteuid() == 0 {
		return err
	}
	_ = filepath.WalkDir(path, func(p string, d fs.DirEntry, _ error) error {
		if d != nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(path)
}
