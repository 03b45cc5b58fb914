package supervisor

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
)

// proc is one process and its start time (platform units).
type proc struct {
	pid   int
	start uint64
}

// recordPath is where earlier versions kept one child's record, a file of
// one record line; KillOrphans reads those as it reads journals.
func recordPath(state string, runID int64) string {
	return filepath.Join(childrenDir(state), strconv.FormatInt(runID, 10))
}

// KillOrphans kills the process groups that an earlier incarnation of the
// daemon recorded under StateDir and left alive, then removes the records.
// Where runs have cgroups it first kills every process left in the run
// cgroups of dead daemons (setsid grandchildren included), and removes
// those cgroups; killed counts both.
// A group is killed only when its recorded leader still runs with the
// recorded start time, or, when the leader is gone, only its members that
// started no earlier than it: a recycled pid is never killed. Records from an
// earlier boot, or of a daemon that still runs, are not acted on. Call it
// before the first Start.
func (s *Supervisor) KillOrphans() (killed int, err error) {
	if s.cg != nil {
		killed = s.cg.killLeftovers()
	}
	dir := childrenDir(s.cfg.StateDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read child records: %w", err)
	}
	boot := bootID()
	// Empty journals set aside by daemons that are gone.
	spares, _ := filepath.Glob(filepath.Join(s.cfg.StateDir, ".journal-spare-*"))
	for _, p := range spares {
		pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(p), ".journal-spare-"))
		if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(p)
		}
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return killed, fmt.Errorf("read child record: %w", err)
		}
		recs, bad := readRecords(string(b))
		for _, err := range bad {
			s.log.Warn("ignoring child record", "file", path, "error", err)
		}
		// One file holds the records of one daemon.
		if len(recs) > 0 && recs[0].Boot == boot && daemonAlive(recs[0]) {
			s.log.Warn("child record belongs to a running daemon, leaving it", "file", path, "daemon_pid", recs[0].DaemonPID)
			continue
		}
		for _, c := range recs {
			switch {
			case c.Boot != boot:
				s.log.Info("ignoring child record from an earlier boot", "file", path, "run_id", c.RunID)
			case s.killRecorded(c):
				killed++
			}
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return killed, fmt.Errorf("remove child record: %w", err)
		}
	}
	return killed, nil
}

// daemonAlive reports whether the daemon that wrote c still runs (this one
// included).
func daemonAlive(c childRecord) bool {
	start, ok := procStart(c.DaemonPID)
	return ok && start == c.DaemonStart
}

// killRecorded kills what is left of the group of c, checked as KillOrphans
// says.
func (s *Supervisor) killRecorded(c childRecord) bool {
	log := s.log.With("run_id", c.RunID, "pgid", c.PGID)
	if start, ok := procStart(c.PID); ok {
		pgid, err := syscall.Getpgid(c.PID)
		if start != c.Start || err != nil || pgid != c.PGID {
			log.Info("recorded pid now belongs to another process, not killing it", "pid", c.PID)
			return false
		}
		if err := syscall.Kill(-c.PGID, syscall.SIGKILL); err != nil {
			log.Error("kill leftover group", "error", err)
			return false
		}
		log.Warn("killed leftover child group of an earlier incarnation", "pid", c.PID)
		return true
	}
	members, err := groupProcs(c.PGID)
	if err != nil {
		log.Error("list leftover group", "error", err)
	}
	n := 0
	for _, m := range members {
		if c.Start != 0 && m.start >= c.Start && syscall.Kill(m.pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	if n > 0 {
		log.Warn("killed leftover processes of an earlier incarnation's group", "processes", n)
	}
	return n > 0
}

// Identity returns this boot's id and this process's start time: with the
// pid, what tells this process apart from any later one (see SameProcess).
func Identity() (boot string, start uint64) {
	start, _ = procStart(os.Getpid())
	return bootID(), start
}

// SameProcess reports whether pid, recorded with Identity's boot and start,
// still runs as the same process: false after a reboot, once it exited, or
// when the pid now belongs to another process.
func SameProcess(boot string, pid int, start uint64) bool {
	if boot != bootID() || pid <= 0 {
		return false
	}
	now, ok := procStart(pid)
	return ok && now == start
}
