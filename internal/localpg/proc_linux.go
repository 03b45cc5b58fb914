package localpg

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// bootTime is when the system booted, from /proc/stat; zero when unknown.
func bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}

// zombie reports whether pid has exited and waits for its parent to reap
// it.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// "1234 (postgres) S ...": the state follows the parenthesised name.
	i := strings.LastIndexByte(string(b), ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// postmasterOf reports whether pid is a postgres whose working directory
// (a postmaster's is its data directory) is dataDir, as far as this
// process may see: another user's working directory is not readable.
func postmasterOf(pid int, dataDir string) bool {
	proc := "/proc/" + strconv.Itoa(pid)
	comm, err := os.ReadFile(proc + "/comm")
	if err != nil {
		return false
	}
	if name := strings.TrimSpace(string(comm)); name != "postgres" && name != "postmaster" {
		return false
	}
	cwd, err := os.Readlink(proc + "/cwd")
	if err != nil {
		return true
	}
	want, err := filepath.EvalSymlinks(dataDir)
	return err != nil || cwd == want
}

// dirInUse reports whether a live process has its working directory in
// dir: a server's processes all work in its data directory, so after a
// crash this says whether some of them are still there.
func dirInUse(dir string) bool {
	want, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return false
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd"); err == nil && cwd == want && !zombie(pid) {
			return true
		}
	}
	return false
}
