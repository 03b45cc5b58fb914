package box

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"golang.org/x/sys/unix"
)

// shimCaps are the capabilities the shim of a child that is not root
// needs while it builds its box, lent as ambient capabilities and given
// up before the program starts (dropCaps): mounts and pivot_root, the
// loopback, the bounding set, and reaching the paths the box shows (the
// qd executable, the paths the config lists) through directories the
// child's user may not enter. No other process of that user may trace
// the shim meanwhile: the kernel refuses to trace a process with
// capabilities the tracer lacks.
var shimCaps = []uintptr{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN, unix.CAP_SETPCAP, unix.CAP_DAC_READ_SEARCH}

// Attr adds to a what the shim of box s needs from the kernel at clone
// time: a mount namespace of its own, a network namespace with NetNone,
// and the capabilities to build them. A daemon that is root makes them
// itself; any other daemon makes them in a user namespace of the child's
// own that maps its uid and gid (given as uid and gid) to themselves, so
// that the child sees its ids unchanged. uid is the child's: the
// daemon's, or the one a.Credential switches to.
func Attr(a *syscall.SysProcAttr, s Spec, daemonRoot bool, uid, gid int) {
	a.Cloneflags |= syscall.CLONE_NEWNS
	if s.Net == NetNone {
		a.Cloneflags |= syscall.CLONE_NEWNET
	}
	if !daemonRoot {
		a.Cloneflags |= syscall.CLONE_NEWUSER
		a.UidMappings = []syscall.SysProcIDMap{{ContainerID: uid, HostID: uid, Size: 1}}
		a.GidMappings = []syscall.SysProcIDMap{{ContainerID: gid, HostID: gid, Size: 1}}
		a.GidMappingsEnableSetgroups = false
	}
	if uid != 0 {
		a.AmbientCaps = shimCaps
	}
}

// Probe says what this host can give a box: the kernel's Landlock ABI,
// and whether shim (the qd executable, which serves as the shim) can make
// a box here, found by having it build one (with NetNone) and exit.
func Probe(shim string) Support {
	s := Support{OS: "linux", Landlock: landlockABI(), UserNS: os.Geteuid() != 0}
	if s.Landlock < MinLandlock {
		s.Reason = "the kernel has no Landlock (it needs Linux 5.13 or later, with landlock in its lsm= boot list)"
		return s
	}
	if err := probeRun(shim, s.UserNS); err != nil {
		s.Reason = fmt.Sprintf("qd cannot make a box's namespaces here: %v", err)
		if s.UserNS {
			s.Reason += "; a daemon that is not root needs unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0; on Ubuntu, kernel.apparmor_restrict_unprivileged_userns=0)"
		}
		return s
	}
	s.Namespaces = true
	return s
}

// probeRun has shim build an empty box and exit.
func probeRun(shim string, userNS bool) error {
	spec := Spec{Net: NetNone, Dir: "/", Probe: true}
	cmd := exec.Command("/bin/true")
	st, err := Prepare(cmd, spec, shim)
	if err != nil {
		return err
	}
	cmd.Args = []string{shim, Arg} // no program: a probe
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	Attr(cmd.SysProcAttr, spec, !userNS, os.Getuid(), os.Getgid())
	err = cmd.Start()
	st.Started()
	if err != nil {
		st.Wait(0)
		return fmt.Errorf("start %s: %w", shim, err)
	}
	err = st.Wait(Wait)
	if werr := cmd.Wait(); err == nil && werr != nil {
		err = fmt.Errorf("the probe %w", werr)
	}
	return err
}
