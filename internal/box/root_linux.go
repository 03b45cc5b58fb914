package box

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// The box's file system is a tmpfs of its own, read-only, that holds only
// what the box shows, each at its own path: the system directories and
// the Spec's paths as bind mounts (clones of the host's mounts, made
// before anything else is mounted, so that every host path is still in
// reach), a few devices on a tmpfs at /dev, /proc, and an empty tmpfs at
// /tmp. What is not there cannot be opened, connected to or listed, by
// any user: the daemon's state directory, other runs' directories and
// every socket but the daemon's. The new root is built on a tmpfs
// mounted over /tmp, in the run's mount namespace only, and entered with
// pivot_root; the host's root is then detached.

// stage is where the new root is built before pivot_root.
const stage = "/tmp"

// bind is one host path the box shows at the same path.
type bind struct {
	path  string
	file  bool
	write bool
	tree  int // the open_tree clone, -1 once moved into the box
}

// devices are the device files of a box's /dev; the first three are
// writable.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// root is the plan of a box's file system, with its clones taken.
type root struct {
	binds []bind            // sorted by path: parents before what is under them
	links map[string]string // system directories that are symbolic links (/bin -> usr/bin)
	devs  []bind
	proc  bind
	hide  []bind // a clone of /dev/null for each file shown empty
}

// plan lists what the box of s shows for program args, and clones each
// host path now, before the staging tmpfs covers /tmp.
func plan(s Spec, args []string) (*root, error) {
	r := &root{links: map[string]string{}}
	for _, d := range SystemDirs {
		fi, err := os.Lstat(d)
		switch {
		case err != nil:
			continue
		case fi.Mode()&fs.ModeSymlink != 0:
			if t, err := os.Readlink(d); err == nil {
				r.links[d] = t
			}
		case fi.IsDir():
			r.add(d, false, false)
		}
	}
	for _, p := range s.Read {
		r.addPath(p, false)
	}
	for _, p := range s.Write {
		r.addPath(p, true)
	}
	for _, p := range r.extraFiles(s, args) {
		if !r.covered(p) {
			r.add(p, true, false)
		}
	}
	slices.SortFunc(r.binds, func(a, b bind) int { return strings.Compare(a.path, b.path) })
	for i := range r.binds {
		if err := r.binds[i].clone(); err != nil {
			return nil, err
		}
	}
	if err := r.cloneBase(); err != nil {
		return nil, err
	}
	for _, h := range append(slices.Clone(Hidden), s.Hide...) {
		if _, err := os.Lstat(h); err == nil && r.covered(h) {
			b := bind{path: h, file: true}
			if err := cloneOf(&b, "/dev/null", unix.MOUNT_ATTR_RDONLY|unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
				return nil, err
			}
			r.hide = append(r.hide, b)
		}
	}
	return r, nil
}

// add adds path to the box, once: a path both read and written is
// written.
func (r *root) add(path string, file, write bool) {
	for i := range r.binds {
		if r.binds[i].path == path {
			r.binds[i].write = r.binds[i].write || write
			return
		}
	}
	r.binds = append(r.binds, bind{path: path, file: file, write: write, tree: -1})
}

// addPath adds a path of the Spec, a directory or a file.
func (r *root) addPath(p string, write bool) {
	fi, err := os.Stat(p)
	r.add(p, err == nil && !fi.IsDir(), write)
}

// extraFiles are the files a box shows beyond the Spec's paths: the
// program, the interpreter its #! line names, the qd executable (for `qd
// enqueue` and the like inside), the daemon's socket, and the file
// /etc/resolv.conf links to, with a network.
func (r *root) extraFiles(s Spec, args []string) []string {
	var out []string
	if len(args) > 0 {
		out = append(out, args[0])
		if in := interpreter(args[0]); in != "" {
			out = append(out, in)
		}
	}
	if exe, err := os.Executable(); err == nil {
		out = append(out, exe)
	}
	if s.Socket != "" {
		out = append(out, s.Socket)
	}
	if s.Net != NetNone {
		if t, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && t != "/etc/resolv.conf" {
			out = append(out, t)
		}
	}
	return out
}

// interpreter is the program a script's #! line names, "" for none.
func interpreter(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReaderSize(f, 256).ReadString('\n')
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	if fs := strings.Fields(rest); len(fs) > 0 && filepath.IsAbs(fs[0]) {
		return fs[0]
	}
	return ""
}

// covered reports whether path is shown by a directory of the box
// already, through the symbolic links of the system directories too.
func (r *root) covered(path string) bool {
	for _, b := range r.binds {
		if !b.file && (path == b.path || strings.HasPrefix(path, b.path+"/")) {
			return true
		}
	}
	for l, t := range r.links {
		if rest, ok := strings.CutPrefix(path, l+"/"); ok {
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(l), t)
			}
			return r.covered(filepath.Join(t, rest))
		}
	}
	return false
}

// clone takes the clone of b's host path, read-only unless b is written.
func (b *bind) clone() error {
	attr := uint64(unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV)
	if !b.write {
		attr |= unix.MOUNT_ATTR_RDONLY
	}
	return cloneOf(b, b.path, attr)
}

// cloneBase clones the devices and /proc.
func (r *root) cloneBase() error {
	for _, d := range devices {
		b := bind{path: d, file: true}
		if err := cloneOf(&b, d, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NOEXEC); err != nil {
			return err
		}
		r.devs = append(r.devs, b)
	}
	r.proc = bind{path: "/proc"}
	return cloneOf(&r.proc, "/proc", unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV|unix.MOUNT_ATTR_NOEXEC)
}

// cloneOf makes b's tree a clone of the mount at src (with what is
// mounted under it), with attr set on all of it.
func cloneOf(b *bind, src string, attr uint64) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, src, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
	if err != nil {
		return fmt.Errorf("show %s in the box: %w", src, err)
	}
	err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: attr})
	if err != nil {
		unix.Close(fd)
		return fmt.Errorf("show %s in the box: set its mount flags: %w", src, err)
	}
	b.tree = fd
	return nil
}

// build makes the box's file system and enters it.
func (r *root) build() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make the box's mounts private: %w", err)
	}
	if err := tmpfs(stage, "mode=0755,size=4m"); err != nil {
		return err
	}
	for l, t := range r.links {
		if err := os.Symlink(t, stage+l); err != nil {
			return fmt.Errorf("link %s in the box: %w", l, err)
		}
	}
	if err := r.base(); err != nil {
		return err
	}
	for i := range r.binds {
		if err := place(&r.binds[i]); err != nil {
			return err
		}
	}
	for i := range r.hide {
		if err := place(&r.hide[i]); err != nil {
			return err
		}
	}
	if err := enter(); err != nil {
		return err
	}
	for _, p := range []string{"/dev", "/"} {
		if err := unix.MountSetattr(unix.AT_FDCWD, p, 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
			return fmt.Errorf("make the box's %s read-only: %w", p, err)
		}
	}
	return nil
}

// base makes /dev, /proc and /tmp.
func (r *root) base() error {
	if err := tmpfs(stage+"/dev", "mode=0755,size=64k"); err != nil {
		return err
	}
	for i := range r.devs {
		if err := place(&r.devs[i]); err != nil {
			return err
		}
	}
	for name, to := range map[string]string{"fd": "/proc/self/fd", "stdin": "/proc/self/fd/0", "stdout": "/proc/self/fd/1", "stderr": "/proc/self/fd/2"} {
		if err := os.Symlink(to, stage+"/dev/"+name); err != nil {
			return fmt.Errorf("link /dev/%s in the box: %w", name, err)
		}
	}
	if err := tmpfs(stage+"/dev/shm", "mode=1777"); err != nil {
		return err
	}
	if err := place(&r.proc); err != nil {
		return err
	}
	return tmpfs(stage+"/tmp", "mode=1777")
}

// tmpfs mounts a new tmpfs at dir, made first.
func tmpfs(dir, opts string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make %s in the box: %w", strings.TrimPrefix(dir, stage), err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fmt.Errorf("mount a tmpfs at %s in the box: %w", strings.TrimPrefix(dir, stage), err)
	}
	return nil
}

// place moves b's clone to its path in the staged root, made first (an
// empty file for a file) unless it is there.
func place(b *bind) error {
	dst := stage + b.path
	if _, err := os.Lstat(dst); errors.Is(err, fs.ErrNotExist) {
		err = os.MkdirAll(filepath.Dir(dst), 0o755)
		if err == nil && b.file {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		} else if err == nil {
			err = os.Mkdir(dst, 0o755)
		}
		if err != nil {
			return fmt.Errorf("make %s in the box: %w", b.path, err)
		}
	}
	err := unix.MoveMount(b.tree, "", unix.AT_FDCWD, dst, unix.MOVE_MOUNT_F_EMPTY_PATH)
	unix.Close(b.tree)
	b.tree = -1
	if err != nil {
		return fmt.Errorf("show %s in the box: %w", b.path, err)
	}
	return nil
}

// enter makes the staged root the root, and detaches the host's.
func enter() error {
	old, err := unix.Open("/", unix.O_DIRECTORY|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("enter the box: %w", err)
	}
	defer unix.Close(old)
	if err := unix.Chdir(stage); err != nil {
		return fmt.Errorf("enter the box: %w", err)
	}
	// With both "." the host's root ends up on top of the new one, where
	// it is detached from.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("enter the box: pivot_root: %w", err)
	}
	if err := unix.Fchdir(old); err != nil {
		return fmt.Errorf("enter the box: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("enter the box: detach the host's root: %w", err)
	}
	return unix.Chdir("/")
}
