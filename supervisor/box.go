package supervisor

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"

	"github.com/qd-run/qd/internal/box"
)

// selfExe is the qd executable as the kernel knows this process's: it
// still names the running binary after the file was replaced on disk.
const selfExe = "/proc/self/exe"

// Credential is who a run's child runs as, when it is not the daemon's
// user (Spec.User): only a daemon that is root may switch to it.
type Credential struct {
	Name     string
	UID, GID int
	Groups   []int // supplementary groups
	Home     string
}

// credential switches a's child to u's uid, gid and groups.
func credential(a *syscall.SysProcAttr, u *Credential) {
	groups := make([]uint32, len(u.Groups))
	for i, g := range u.Groups {
		groups[i] = uint32(g)
	}
	a.Credential = &syscall.Credential{Uid: uint32(u.UID), Gid: uint32(u.GID), Groups: groups}
}

// boxed makes cmd, c's child, the shim that starts c's program in its box
// (box.Prepare, box.Attr), and returns the status to wait on; nil when c
// has no box. The box gets the run's working directory: its fresh one,
// written, or the agent's dir, read unless listed in write; without
// either the child starts in its private /tmp.
func (s *Supervisor) boxed(c *child, cmd *exec.Cmd) (*box.Status, error) {
	if c.spec.Box == nil {
		return nil, nil
	}
	b := *c.spec.Box
	b.Read, b.Write = slices.Clone(b.Read), slices.Clone(b.Write)
	switch {
	case c.workdir != "":
		b.Write, b.Dir = append(b.Write, c.workdir), c.workdir
	case c.spec.Dir != "":
		if !under(b.Write, c.spec.Dir) {
			b.Read = append(b.Read, c.spec.Dir)
		}
		b.Dir = c.spec.Dir
	default:
		b.Dir = "/tmp"
	}
	cmd.Dir = "" // the shim enters it, in the box
	st, err := box.Prepare(cmd, b, s.shim())
	if err != nil {
		return nil, err
	}
	uid, gid := os.Geteuid(), os.Getegid()
	if u := c.spec.User; u != nil {
		uid, gid = u.UID, u.GID
	}
	box.Attr(cmd.SysProcAttr, b, os.Geteuid() == 0, uid, gid)
	return st, nil
}

// under reports whether path is one of dirs or under one of them.
func under(dirs []string, path string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// awaitBox waits until c's shim has started the program in its box. When
// it could not, the shim has exited or is killed, and is reaped: the error
// says why, and the program never ran.
func awaitBox(c *child, cmd *exec.Cmd, st *box.Status) error {
	err := st.Wait(box.Wait)
	if err == nil {
		return nil
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
	closePidfd(&c.pidfd)
	return err
}

func closePidfd(fd *int) {
	if *fd >= 0 {
		syscall.Close(*fd)
		*fd = -1
	}
}

func (s *Supervisor) shim() string {
	if s.cfg.Shim != "" {
		return s.cfg.Shim
	}
	return selfExe
}

// BoxSupport says what boxes this supervisor can make here: found by
// box.Probe when first asked, and remembered.
func (s *Supervisor) BoxSupport() box.Support {
	s.boxOnce.Do(func() { s.boxes = box.Probe(s.shim()) })
	return s.boxes
}

// ProbeBox says what boxes a daemon started now by this process's user,
// where this process runs, could make, for checks of a config before a
// daemon starts.
func ProbeBox() box.Support { return box.Probe(selfExe) }
