package supervisor

import (
	"sync"
	"time"
)

// Cap is a limit of the host or of the daemon's process that bounds how
// many children the daemon can hold at once: RLIMIT_NOFILE (each child
// holds FilesPerChild descriptors of the daemon's), RLIMIT_NPROC, the
// kernel's pid_max (shared by every process and thread of the system),
// the pids.max or memory.max of the daemon's cgroup.
type Cap struct {
	Limit string // "RLIMIT_NOFILE", "RLIMIT_NPROC", "kernel.pid_max", "pids.max", "memory.max"
	Value int64  // the limit
	// Children is about how many children it lets the daemon hold, those
	// live now included.
	Children int
}

// FilesPerChild is how many of the daemon's descriptors a live child
// holds (its output pipe, its pidfd, its log and streams files, its
// cgroup's), as qdbench's children part measures it.
const FilesPerChild = 7

// MemoryPerChild is about how much of the daemon's memory a live child
// costs (qdbench's children part: 30-45 KiB), for memory.max; the child's
// own memory comes on top, when the child is in the daemon's cgroup.
const MemoryPerChild = 64 << 10

// capsEvery is how long computed caps are kept: counting the daemon's
// open files costs a directory read as long as the files are many.
const capsEvery = 10 * time.Second

// capsCache keeps the last caps computed.
type capsCache struct {
	mu   sync.Mutex
	at   time.Time
	caps []Cap
	// base is the daemon's open files beside its children's, counted
	// while they were few: with thousands, counting costs more than a
	// status, and base plus FilesPerChild a child is what it finds.
	base int
}

// countBelow is the number of live children under which the open files
// are counted rather than reckoned from base.
const countBelow = 64

// openFiles is how many files the daemon has open, counted or reckoned.
func (c *capsCache) openFiles(live int) int {
	if live < countBelow || c.base == 0 {
		if n := countOpenFiles(); n > 0 {
			c.base = max(1, n-live*FilesPerChild)
			return n
		}
	}
	return c.base + live*FilesPerChild
}

// Caps lists the limits that let the daemon hold fewer than want children
// at once, with about how many each allows; none when every limit allows
// want.
func (s *Supervisor) Caps(want int) []Cap {
	s.caps.mu.Lock()
	defer s.caps.mu.Unlock()
	if s.caps.at.IsZero() || time.Since(s.caps.at) > capsEvery {
		live := s.liveCount()
		s.caps.caps, s.caps.at = hostCaps(live, s.caps.openFiles(live)), time.Now()
	}
	var out []Cap
	for _, c := range s.caps.caps {
		if c.Children < want {
			out = append(out, c)
		}
	}
	return out
}

func (s *Supervisor) liveCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.children)
}
