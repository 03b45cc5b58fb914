package supervisor

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in its own process group and has the kernel
// kill it when the creating thread (a spawner thread) dies. Where the kernel
// gives one, a pidfd of the child is stored in *pidfd (else it stays -1).
func sysProcAttr(pidfd *int) *syscall.SysProcAttr {
	*pidfd = -1
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, PidFD: pidfd}
}

// procStat reads the process group (field 5) and start time in clock ticks
// since boot (field 22) of pid from /proc. ok is false when pid is gone.
func procStat(pid int) (pgrp int, start uint64, zombie, ok bool) {
	b, ok := readProcStat(pid)
	if !ok {
		return 0, 0, false, false
	}
	// The command name (field 2) may hold spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false, false
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3
	if len(f) < 20 {
		return 0, 0, false, false
	}
	pgrp, err1 := strconv.Atoi(string(f[2]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false, false
	}
	return pgrp, start, string(f[0]) == "Z", true
}

// readProcStat reads /proc/<pid>/stat with plain system calls: it is read
// for every child started, and os.ReadFile would also stat the file and
// offer its descriptor to the poller, which refuses it.
func readProcStat(pid int) ([]byte, bool) {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/stat", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	// One line well under 1 KiB (the command name is at most 64 bytes);
	// read until EOF all the same.
	buf := make([]byte, 0, 1024)
	for {
		n, err := unix.Read(fd, buf[len(buf):cap(buf)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, false
		}
		if n == 0 {
			return buf, true
		}
		buf = buf[:len(buf)+n]
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, 1024)...)[:len(buf)]
		}
	}
}

// procStart returns the start time of a live pid.
func procStart(pid int) (uint64, bool) {
	_, start, zombie, ok := procStat(pid)
	return start, ok && !zombie
}

// groupProcs lists the live members of process group pgid.
func groupProcs(pgid int) ([]proc, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if g, start, zombie, ok := procStat(pid); ok && !zombie && g == pgid {
			out = append(out, proc{pid: pid, start: start})
		}
	}
	return out, nil
}

// bootID identifies this boot, so that records from an earlier boot are
// never acted on.
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return string(bytes.TrimSpace(b))
}

// hasExited reports, without waiting and without reaping it, whether the
// child pid has exited (or is already reaped): the exit a waiter has not
// yet seen.
func hasExited(pid int) bool {
	var info unix.Siginfo
	err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
	if err != nil {
		return errors.Is(err, syscall.ECHILD)
	}
	return info.Signo != 0 // zero: no exit to report yet
}

// waitExited blocks until pid has exited without reaping it, so that its pid
// (and so the group id) cannot be reused while the group is killed. It
// closes pidfd. With a pidfd the wait parks in the runtime's poller, not in
// a blocking system call: no OS thread is held per child.
func waitExited(pid, pidfd int) bool {
	if pidfd >= 0 {
		if held, ok := pollExited(pidfd); ok {
			return held
		}
	}
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		return err == nil
	}
}

// pollExited waits for the child of pidfd to exit, through the poller; ok is
// false when the pidfd could not be polled (the caller then blocks in
// waitid). It closes pidfd.
func pollExited(pidfd int) (held, ok bool) {
	if err := unix.SetNonblock(pidfd, true); err != nil {
		unix.Close(pidfd)
		return false, false
	}
	f := os.NewFile(uintptr(pidfd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return false, false
	}
	var werr error
	err = rc.Read(func(fd uintptr) bool {
		var info unix.Siginfo
		werr = unix.Waitid(unix.P_PIDFD, int(fd), &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		switch {
		case errors.Is(werr, syscall.EINTR):
			return false
		case werr != nil:
			return true
		}
		// With WNOHANG and the child still running, the kernel leaves
		// si_signo zero.
		return info.Signo != 0
	})
	if err != nil {
		return false, false
	}
	return werr == nil, true
}
