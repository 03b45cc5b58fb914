package box

import (
	"errors"
	"fmt"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// landlockABI is the kernel's Landlock ABI, 0 without Landlock.
func landlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// abis are the rights each Landlock ABI handles, up to the newest one qd
// is tested with: a newer kernel is used as that one.
var abis = []landlock.Config{{}, landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7}

// confine restricts this thread, and so the program it execs and all its
// descendants, to the box of s with Landlock: read and run programs from
// what the box shows, write only its writable paths and /tmp, and, with
// NetPorts, connect to s.Ports alone and bind no TCP port. It sets
// no_new_privs first, which Landlock requires.
func confine(s Spec, r *root, abi int) error {
	cfg := abis[min(abi, len(abis)-1)]
	if s.Net != NetPorts {
		cfg.HandledAccessNet = 0
	}
	var ro, roFiles, rw, rwFiles []string
	for _, b := range r.binds {
		switch {
		case b.write && b.file:
			rwFiles = append(rwFiles, b.path)
		case b.write:
			rw = append(rw, b.path)
		case b.file:
			roFiles = append(roFiles, b.path)
		default:
			ro = append(ro, b.path)
		}
	}
	write := landlock.RWDirs(append(rw, "/tmp", "/dev/shm")...)
	if abi >= 2 {
		write = write.WithRefer() // renames across directories of what it may write
	}
	rules := []landlock.Rule{
		landlock.PathAccess(ll.AccessFSReadDir, "/"),
		landlock.RODirs(ro...),
		landlock.ROFiles(roFiles...),
		write,
		landlock.RWFiles(append(rwFiles, devices[:3]...)...),
		landlock.ROFiles(devices[3:]...),
		landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSReadDir, "/proc"),
	}
	if s.Net == NetPorts {
		for _, p := range s.Ports {
			rules = append(rules, landlock.ConnectTCP(p))
		}
	}
	fd, _, err := cfg.NewRulesetFD(rules...)
	if err != nil {
		return fmt.Errorf("make the Landlock ruleset: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("set no_new_privs: %w", err)
	}
	if err := ll.LandlockRestrictSelf(fd, 0); err != nil {
		return fmt.Errorf("enforce the Landlock ruleset: %w", err)
	}
	return nil
}

// dropCaps gives up every capability for good: the ambient ones the
// supervisor lent the shim, the bounding set (so that a box whose child
// runs as root gets none back from exec) and the thread's own sets.
func dropCaps() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear the ambient capabilities: %w", err)
	}
	for c := uintptr(0); c < 64; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past the last capability this kernel has
		}
		if err != nil {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("clear the capabilities: %w", err)
	}
	return nil
}

// loopbackUp brings up the loopback interface of a new network namespace:
// the box's own 127.0.0.1, which reaches nothing of the host's.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("bring up the box's loopback: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err == nil {
		err = unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr)
	}
	if err == nil {
		ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
		err = unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
	}
	if err != nil {
		return fmt.Errorf("bring up the box's loopback: %w", err)
	}
	return nil
}
