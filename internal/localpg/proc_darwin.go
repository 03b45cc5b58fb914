package localpg

import (
	"time"

	"golang.org/x/sys/unix"
)

// bootTime is when the system booted, from kern.boottime; zero when
// unknown.
func bootTime() time.Time {
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return time.Time{}
	}
	return time.Unix(tv.Unix())
}

// zombie is not told apart on macOS: a zombie postmaster is rare there,
// since launchd reaps orphans.
func zombie(int) bool { return false }

// postmasterOf cannot look at another process's name and directory on
// macOS without more privilege; the boot time check of stale does the
// work.
func postmasterOf(int, string) bool { return true }

// dirInUse cannot tell on macOS; the server's own check of its shared
// memory stands in.
func dirInUse(string) bool { return false }
