package bench

import (
	"bytes"
	"fmt"
	"os"
	"sort"
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

// machineCPU is the busy and idle time of all the machine's CPUs, from the
// first line of /proc/stat.
type machineCPU struct {
	Busy time.Duration // user, nice, system, irq, softirq, steal
	Idle time.Duration // idle, iowait
}

// readMachine reads the machine's CPU times.
func readMachine() (machineCPU, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineCPU{}, fmt.Errorf("read machine cpu: %w", err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return machineCPU{}, fmt.Errorf("read machine cpu: unexpected first line %q of /proc/stat", line)
	}
	var t [8]time.Duration
	for k := range t {
		v, err := strconv.ParseInt(f[1+k], 10, 64)
		if err != nil {
			return machineCPU{}, fmt.Errorf("read machine cpu: field %d of %q: %w", k+1, line, err)
		}
		t[k] = time.Duration(v) * (time.Second / userHZ)
	}
	return machineCPU{Busy: t[0] + t[1] + t[2] + t[5] + t[6] + t[7], Idle: t[3] + t[4]}, nil
}

// since is the machine's CPU from m0 to m.
func (m machineCPU) since(m0 machineCPU) machineCPU {
	return machineCPU{Busy: m.Busy - m0.Busy, Idle: m.Idle - m0.Idle}
}

// busyShare is the share of the CPUs' time that was busy.
func (m machineCPU) busyShare() float64 {
	if m.Busy+m.Idle <= 0 {
		return 0
	}
	return float64(m.Busy) / float64(m.Busy+m.Idle)
}

// machineSampler reads the machine's CPU times every few milliseconds, so
// that the CPU of a span known only afterwards (the middle 80% of the
// finish times) can be told.
type machineSampler struct {
	stopped chan struct{}
	done    chan struct{}
	at      []time.Time
	m       []machineCPU
	err     error
}

// sampleMachine starts a sampler; stop it before reading it.
func sampleMachine() *machineSampler {
	s := &machineSampler{stopped: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			m, err := readMachine()
			if err != nil {
				s.err = err
				return
			}
			s.at, s.m = append(s.at, time.Now()), append(s.m, m)
			select {
			case <-s.stopped:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the sampling, with a last sample.
func (s *machineSampler) stop() error {
	close(s.stopped)
	<-s.done
	return s.err
}

// between is the machine's CPU from t0 to t1, interpolated between the
// samples around each.
func (s *machineSampler) between(t0, t1 time.Time) (machineCPU, error) {
	if len(s.at) < 2 || t0.Before(s.at[0]) || t1.After(s.at[len(s.at)-1]) || !t1.After(t0) {
		return machineCPU{}, fmt.Errorf("machine cpu: span %s–%s not within the samples", t0.Format(time.StampMicro), t1.Format(time.StampMicro))
	}
	return s.at1(t1).since(s.at1(t0)), nil
}

// at1 is the machine's CPU times at t, interpolated.
func (s *machineSampler) at1(t time.Time) machineCPU {
	i := sort.Search(len(s.at), func(i int) bool { return !s.at[i].Before(t) })
	if i == 0 {
		return s.m[0]
	}
	a, b := s.at[i-1], s.at[i]
	f := float64(t.Sub(a)) / float64(b.Sub(a))
	mix := func(x, y time.Duration) time.Duration { return x + time.Duration(f*float64(y-x)) }
	return machineCPU{Busy: mix(s.m[i-1].Busy, s.m[i].Busy), Idle: mix(s.m[i-1].Idle, s.m[i].Idle)}
}
