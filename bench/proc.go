package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, which
// Linux fixes at 100 on every architecture it exports it to user space.
const userHZ = 100

// procCPU is the CPU a process used, from /proc/<pid>/stat.
type procCPU struct {
	Self     time.Duration // utime + stime of all its threads
	Children time.Duration // cutime + cstime of the children it has reaped
}

// readProcCPU reads the CPU times of pid.
func readProcCPU(pid int) (procCPU, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procCPU{}, fmt.Errorf("read cpu of pid %d: %w", pid, err)
	}
	// The command name (field 2) is in parentheses and may hold spaces;
	// the fields after its closing parenthesis start at field 3 (state).
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procCPU{}, fmt.Errorf("read cpu of pid %d: no command name in /proc/%d/stat", pid, pid)
	}
	f := strings.Fields(string(data[i+1:]))
	// utime, stime, cutime, cstime are fields 14-17, so 11-14 here.
	if len(f) < 15 {
		return procCPU{}, fmt.Errorf("read cpu of pid %d: /proc/%d/stat has %d fields", pid, pid, len(f)+2)
	}
	var t [4]int64
	for k := range t {
		if t[k], err = strconv.ParseInt(f[11+k], 10, 64); err != nil {
			return procCPU{}, fmt.Errorf("read cpu of pid %d: field %d: %w", pid, 14+k, err)
		}
	}
	tick := time.Second / userHZ
	return procCPU{Self: time.Duration(t[0]+t[1]) * tick, Children: time.Duration(t[2]+t[3]) * tick}, nil
}

// readRSS returns the resident set (VmRSS) and its peak (VmHWM) of pid in
// bytes.
func readRSS(pid int) (rss, peak int64, err error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read memory of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("read memory of pid %d: unexpected %q", pid, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read memory of pid %d: %q: %w", pid, line, err)
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			peak = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("read memory of pid %d: no VmRSS in /proc/%d/status", pid, pid)
	}
	return rss, peak, nil
}

// cpuOf sums the CPU (own, not children's) of pids; pids that are gone
// count nothing.
func cpuOf(pids []int) map[int]time.Duration {
	out := make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		if c, err := readProcCPU(pid); err == nil {
			out[pid] = c.Self
		}
	}
	return out
}

// cpuDelta is the CPU the processes of after used since before; a process
// missing from before started in between and counts from zero.
func cpuDelta(before, after map[int]time.Duration) time.Duration {
	var d time.Duration
	for pid, t := range after {
		d += t - before[pid]
	}
	return d
}

// haveProc reports whether this system has a Linux-style /proc.
func haveProc() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}
