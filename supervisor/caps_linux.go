package supervisor

import (
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// hostCaps reads each limit and how many children it allows beside the
// live ones. (The Go runtime raised RLIMIT_NOFILE's soft limit to its hard
// one at start; children get the limit qd was started with back.)
func hostCaps(live, open int) []Cap {
	var caps []Cap
	var r unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &r) == nil && r.Cur != unix.RLIM_INFINITY && r.Cur < math.MaxInt32 && open > 0 {
		free := int(r.Cur) - open - 32 // the database's connections, the socket's clients
		caps = append(caps, Cap{Limit: "RLIMIT_NOFILE", Value: int64(r.Cur), Children: live + max(0, free/FilesPerChild)})
	}
	// Root is not held to RLIMIT_NPROC.
	if os.Geteuid() != 0 && unix.Getrlimit(unix.RLIMIT_NPROC, &r) == nil && r.Cur != unix.RLIM_INFINITY && r.Cur < math.MaxInt32 {
		caps = append(caps, Cap{Limit: "RLIMIT_NPROC", Value: int64(r.Cur), Children: int(r.Cur) - threads()})
	}
	if max, ok := readInt("/proc/sys/kernel/pid_max"); ok {
		if used, ok := tasksNow(); ok {
			caps = append(caps, Cap{Limit: "kernel.pid_max", Value: max, Children: live + int(max-used)})
		}
	}
	if dir := ownCgroupDir(); dir != "" {
		if max, cur, ok := cgroupPair(dir, "pids.max", "pids.current"); ok {
			caps = append(caps, Cap{Limit: "pids.max", Value: max, Children: live + int(max-cur)})
		}
		if max, cur, ok := cgroupPair(dir, "memory.max", "memory.current"); ok {
			caps = append(caps, Cap{Limit: "memory.max", Value: max, Children: live + int((max-cur)/MemoryPerChild)})
		}
	}
	return caps
}

// tasksNow is how many processes and threads the system has, each of
// which holds a process id: the fourth field of /proc/loadavg.
func tasksNow() (int64, bool) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) < 4 {
		return 0, false
	}
	_, total, ok := strings.Cut(f[3], "/")
	n, err := strconv.ParseInt(total, 10, 64)
	return n, ok && err == nil
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v, err == nil
}

// countOpenFiles counts this process's open files; 0 when it cannot.
func countOpenFiles() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0
	}
	return len(ents)
}

// threads counts this process's threads.
func threads() int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return 0
	}
	return len(ents)
}

// ownCgroupDir is the cgroup2 directory of this process; "" without one.
func ownCgroupDir() string {
	own, err := ownCgroup()
	if err != nil {
		return ""
	}
	mount, err := cgroup2Mount()
	if err != nil {
		return ""
	}
	return filepath.Join(mount, own)
}

// cgroupPair reads a limit and its use from dir; false when the limit is
// "max" or either cannot be read.
func cgroupPair(dir, limit, use string) (max, cur int64, ok bool) {
	max, ok1 := readInt(filepath.Join(dir, limit))
	cur, ok2 := readInt(filepath.Join(dir, use))
	return max, cur, ok1 && ok2
}
