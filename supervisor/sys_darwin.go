package supervisor

import (
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// sysProcAttr puts the child in its own process group. macOS has no
// parent-death signal; KillOrphans covers a crashed daemon.
func sysProcAttr(pidfd *int) *syscall.SysProcAttr {
	*pidfd = -1
	return &syscall.SysProcAttr{Setpgid: true}
}

func startOf(k *unix.KinfoProc) uint64 {
	t := k.Proc.P_starttime
	return uint64(t.Sec)*1_000_000 + uint64(t.Usec)
}

// procStart returns the start time of a live pid in microseconds.
func procStart(pid int) (uint64, bool) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || k.Proc.P_pid != int32(pid) || k.Proc.P_stat == 5 { // SZOMB
		return 0, false
	}
	return startOf(k), true
}

// groupProcs lists the live members of process group pgid.
func groupProcs(pgid int) ([]proc, error) {
	ks, err := unix.SysctlKinfoProcSlice("kern.proc.pgrp", pgid)
	if err != nil {
		return nil, err
	}
	var out []proc
	for i := range ks {
		if ks[i].Proc.P_stat != 5 {
			out = append(out, proc{pid: int(ks[i].Proc.P_pid), start: startOf(&ks[i])})
		}
	}
	return out, nil
}

// bootID identifies this boot by its boot time.
func bootID() string {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return ""
	}
	return strconv.FormatInt(int64(tv.Sec), 10)
}

// waitExited is not available here: the child is reaped before its group is
// killed.
func waitExited(int, int) bool { return false }

// hasExited is false here: the waiter alone learns of the exit.
func hasExited(int) bool { return false }
