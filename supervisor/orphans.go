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

// childRecord is what the supervisor writes for each child so that a later
// incarnation can kill the group if this one dies without cleaning up.
type childRecord struct {
	Boot        string // bootID() when written
	DaemonPID   int
	DaemonStart uint64
	PGID, PID   int
	Start       uint64 // the child's start time
	RunID       int64
}

func (c childRecord) encode() string {
	return fmt.Sprintf("boot=%s daemon=%d:%d pgid=%d pid=%d start=%d run=%d\n",
		c.Boot, c.DaemonPID, c.DaemonStart, c.PGID, c.PID, c.Start, c.RunID)
}

func decodeRecord(text string) (childRecord, error) {
	var c childRecord
	kv := map[string]string{}
	for _, f := range strings.Fields(text) {
		k, v, _ := strings.Cut(f, "=")
		kv[k] = v
	}
	d, ds, _ := strings.Cut(kv["daemon"], ":")
	var errs []error
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		errs = append(errs, err)
		return n
	}
	c.Boot = kv["boot"]
	c.DaemonPID, c.DaemonStart = int(num(d)), uint64(num(ds))
	c.PGID, c.PID, c.Start = int(num(kv["pgid"])), int(num(kv["pid"])), uint64(num(kv["start"]))
	c.RunID = num(kv["run"])
	if err := errors.Join(errs...); err != nil || c.PGID <= 1 || c.PID <= 1 {
		return c, fmt.Errorf("parse child record %q: bad field", strings.TrimSpace(text))
	}
	return c, nil
}

func recordPath(state string, runID int64) string {
	return filepath.Join(childrenDir(state), strconv.FormatInt(runID, 10))
}

// record writes r's child record.
func (s *Supervisor) record(r *run) {
	start, _ := procStart(r.pid)
	self, _ := procStart(os.Getpid())
	c := childRecord{Boot: bootID(), DaemonPID: os.Getpid(), DaemonStart: self,
		PGID: r.pid, PID: r.pid, Start: start, RunID: r.l.RunID}
	path := recordPath(s.cfg.StateDir, r.l.RunID)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(c.encode()), 0o600); err != nil {
		r.log.Error("write child record", "error", err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		r.log.Error("write child record", "error", err)
	}
}

func (s *Supervisor) unrecord(r *run) {
	err := os.Remove(recordPath(s.cfg.StateDir, r.l.RunID))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		r.log.Error("remove child record", "error", err)
	}
}

// KillOrphans kills the process groups that an earlier incarnation of the
// daemon recorded under StateDir and left alive, then removes the records.
// A group is killed only when its recorded leader still runs with the
// recorded start time, or, when the leader is gone, only its members that
// started no earlier than it: a recycled pid is never killed. Records from an
// earlier boot, or of a daemon that still runs, are not acted on. Call it
// before the first Start.
func (s *Supervisor) KillOrphans() (killed int, err error) {
	dir := childrenDir(s.cfg.StateDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read child records: %w", err)
	}
	boot := bootID()
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		b, err := os.ReadFile(path)
		if err != nil {
			return killed, fmt.Errorf("read child record: %w", err)
		}
		c, err := decodeRecord(string(b))
		switch {
		case err != nil:
			s.log.Warn("ignoring child record", "file", path, "error", err)
		case c.Boot != boot:
			s.log.Info("ignoring child record from an earlier boot", "file", path)
		case daemonAlive(c):
			s.log.Warn("child record belongs to a running daemon, leaving it", "file", path, "daemon_pid", c.DaemonPID)
			continue
		case s.killRecorded(c):
			killed++
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
