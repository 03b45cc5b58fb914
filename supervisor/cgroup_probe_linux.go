package supervisor

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// limitCtls are the controllers qd enables for runs, where it may.
var limitCtls = []string{"cpu", "memory"}

// daemonLeaf is where a daemon moves itself when its own cgroup is the
// parent: a cgroup with processes cannot hand controllers to children.
const daemonLeaf = "qd-daemon"

// cgPlan is where this process would put its runs' cgroups.
type cgPlan struct {
	mount     string // the cgroup2 mount point
	own       string // this process's cgroup, as /proc/self/cgroup says
	base      string // directory of the parent P
	delegated bool   // base is the daemon's own cgroup
	avail     []string
}

// probeCgroup finds where runs' cgroups can go, reading only; the error
// says why they cannot.
func probeCgroup() (cgPlan, error) {
	var p cgPlan
	if os.Getenv(NoCgroupEnv) != "" {
		return p, fmt.Errorf("%s is set", NoCgroupEnv)
	}
	var err error
	if p.mount, err = cgroup2Mount(); err != nil {
		return p, err
	}
	if p.own, err = ownCgroup(); err != nil {
		return p, err
	}
	// A daemon that moved itself out of its own cgroup (leaveBase) still
	// uses that one.
	p.own = strings.TrimSuffix(p.own, "/"+daemonLeaf)
	if p.own != "/" {
		dir := filepath.Join(p.mount, p.own)
		if delegated(dir) {
			p.base, p.delegated = dir, true
		}
	}
	if p.base == "" {
		if os.Geteuid() != 0 {
			if p.own == "/" {
				return p, errUndelegated{fmt.Errorf("qd is not root and its cgroup is the root of the cgroup2 file system at %s", p.mount)}
			}
			return p, errUndelegated{fmt.Errorf("cgroup %s is not delegated to qd (under systemd, set Delegate=yes in the unit) and qd is not root", p.own)}
		}
		p.base = filepath.Join(p.mount, "qd")
	}
	probe := p.base
	if _, err := os.Stat(probe); err != nil {
		probe = filepath.Dir(probe)
	}
	if err := unix.Access(probe, unix.W_OK); err != nil {
		return p, fmt.Errorf("cannot create cgroups in %s: %w", probe, err)
	}
	// What the parent may hand to its children: its own controllers when
	// qd may enable them there, else what the root enabled for it.
	from := filepath.Join(p.base, "cgroup.controllers")
	if _, err := os.Stat(p.base); err != nil {
		from = filepath.Join(p.mount, "cgroup.subtree_control")
	}
	have := readWords(from)
	for _, c := range limitCtls {
		if slices.Contains(have, c) {
			p.avail = append(p.avail, c)
		}
	}
	return p, nil
}

// errUndelegated: not root, and no cgroup delegated to this process.
type errUndelegated struct{ error }

// ProbeContainment says how a daemon started now by this process's user,
// where this process runs, would contain its runs, without creating
// anything: for checks of a config before a daemon starts.
func ProbeContainment() Containment {
	p, err := probeCgroup()
	if err != nil {
		var u errUndelegated
		return Containment{Kind: ContainProcessGroup, Reason: err.Error(), Undecided: errors.As(err, &u)}
	}
	return Containment{Kind: ContainCgroup, Path: p.base, Mount: p.mount, Controllers: p.avail, Reason: missingReason(p.avail, p.mount)}
}

func missingReason(have []string, mount string) string {
	var miss []string
	for _, c := range limitCtls {
		if !slices.Contains(have, c) {
			miss = append(miss, c)
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return fmt.Sprintf("%s controller not enabled in cgroup v2 at %s", strings.Join(miss, " and "), mount)
}

// cgroup2Mount finds where the cgroup2 file system is mounted: at
// /sys/fs/cgroup on a unified hierarchy, at /sys/fs/cgroup/unified on a
// hybrid one.
func cgroup2Mount() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("find the cgroup2 mount: %w", err)
	}
	defer f.Close()
	var found []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS... - FSTYPE SOURCE SUPER
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fs, pf := strings.Fields(post), strings.Fields(pre)
		if ok && len(fs) > 0 && fs[0] == "cgroup2" && len(pf) >= 5 && pf[3] == "/" {
			found = append(found, unescapeMount(pf[4]))
		}
	}
	for _, want := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if slices.Contains(found, want) {
			return want, nil
		}
	}
	if len(found) > 0 {
		return found[0], nil
	}
	return "", errors.New("no cgroup2 file system is mounted")
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ownCgroup is this process's cgroup in the cgroup2 hierarchy.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read own cgroup: %w", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if path, ok := strings.CutPrefix(line, "0::"); ok {
			return path, nil
		}
	}
	return "", errors.New("this process has no cgroup2 cgroup (/proc/self/cgroup has no 0:: line)")
}

// delegated reports whether the cgroup at dir is handed to this process to
// manage: systemd marks a unit's cgroup so with Delegate=yes (an extended
// attribute), and gives a unit's user write access to it.
func delegated(dir string) bool {
	buf := make([]byte, 8)
	for _, attr := range []string{"trusted.delegate", "user.delegate"} {
		if n, err := unix.Getxattr(dir, attr, buf); err == nil && string(buf[:n]) == "1" {
			return true
		}
	}
	if os.Geteuid() == 0 {
		return false // root may write anywhere: that proves nothing
	}
	for _, p := range []string{dir, filepath.Join(dir, "cgroup.procs"), filepath.Join(dir, "cgroup.subtree_control")} {
		if unix.Access(p, unix.W_OK) != nil {
			return false
		}
	}
	return true
}

func readWords(path string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	return strings.Fields(string(b))
}

func writeFile(path, text string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(text)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
