package api

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// bindDirOverhead is what the private bind directory adds to the socket's
// directory: "/.q" plus six random characters, then "/s".
const bindDirOverhead = len("/.qxxxxxx/s")

// socket is a bound, listening status socket, the lock that makes it ours,
// and the identity of the file so that Close removes only our own.
type socket struct {
	ln   *net.UnixListener
	path string
	dev  uint64
	ino  uint64
	lock *os.File
	// replaced is true when a stale socket was removed to make way.
	replaced bool
}

// bindSocket creates the status socket at path, mode 0600 from the moment
// the path exists. It refuses to take over a live daemon's socket or any
// file that is not a socket, and replaces a socket nobody listens on.
func bindSocket(path string) (*socket, error) {
	if err := CheckSocketPath(path); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	lock, err := lockFile(path + ".lock")
	if err != nil {
		return nil, err
	}
	s, err := bindUnlocked(dir, path)
	if err != nil {
		lock.Close()
		return nil, err
	}
	s.lock = lock
	return s, nil
}

func bindUnlocked(dir, path string) (*socket, error) {
	replaced, err := clearStale(path)
	if err != nil {
		return nil, err
	}
	ln, err := bindPrivate(dir, path)
	if err != nil {
		return nil, err
	}
	s := &socket{ln: ln, path: path, replaced: replaced}
	if s.dev, s.ino, err = fileID(path); err != nil {
		ln.Close()
		os.Remove(path)
		return nil, fmt.Errorf("stat status socket: %w", err)
	}
	return s, nil
}

// CheckSocketPath fails, naming the path and the limit, when a daemon could
// not listen at path because it is too long for this platform's sun_path
// (counting what binding needs on top). The config check uses it, so that
// the limit is said once.
func CheckSocketPath(path string) error {
	return checkSocketPath(path, bindDirOverhead-len("/"+filepath.Base(path)))
}

// checkSocketPath fails with an error naming the path and the limit when
// path (plus extra bytes qd needs while binding) does not fit in sun_path,
// instead of bind's bare "invalid argument".
func checkSocketPath(path string, extra int) error {
	limit := sunPathSize - 1
	allowed := limit - max(extra, 0)
	if len(path) <= allowed {
		return nil
	}
	return fmt.Errorf("socket path %s is %d bytes, but a unix socket path may have at most %d bytes on %s (sun_path is %d bytes); choose a shorter socket path",
		path, len(path), allowed, runtime.GOOS, sunPathSize)
}

// lockFile takes an exclusive flock on name for the server's lifetime: the
// single-instance guard that does not race the way probing the socket does.
// The file is left in place on exit; removing it would let two daemons hold
// locks on different files.
func lockFile(name string) (*os.File, error) {
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := flock(f); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another qd is running (%s)", holder(name))
		}
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// holder describes who holds the lock file name, for the error message.
func holder(name string) string {
	b, err := os.ReadFile(name)
	if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
		return "pid " + strconv.Itoa(pid) + " holds " + name
	}
	return name + " is locked"
}

// clearStale makes way for a new socket at path: nothing there is fine; a
// socket that refuses connections is stale and removed; a socket that
// answers, or anything that is not a socket, is refused and left alone.
func clearStale(path string) (removed bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("inspect socket path: %w", err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return false, fmt.Errorf("socket path %s exists and is not a socket (%s); qd will not remove it: delete it or choose another socket path",
			path, fileKind(fi.Mode()))
	}
	conn, err := net.DialTimeout("unix", path, 2*time.Second)
	if err == nil {
		conn.Close()
		return false, fmt.Errorf("another qd is running (socket %s answers)", path)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return false, fmt.Errorf("probe existing socket %s: %w; qd will not remove it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("remove stale socket: %w", err)
	}
	return true, nil
}

func fileKind(m fs.FileMode) string {
	switch m.Type() {
	case 0:
		return "a regular file"
	case fs.ModeSymlink:
		return "a symbolic link"
	case fs.ModeDir:
		return "a directory"
	case fs.ModeNamedPipe:
		return "a named pipe"
	}
	return "mode " + m.String()
}

// bindPrivate binds the socket inside a fresh 0700 directory next to path,
// narrows it to 0600 there, where no other user can reach it, and then
// links it to path. link(2), unlike rename(2), never replaces whatever
// might have appeared at path meanwhile. The process umask is not touched:
// it is process-wide, and agents may be forking at the same time.
func bindPrivate(dir, path string) (*net.UnixListener, error) {
	tmpDir, err := privateDir(dir)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmpDir)
	tmp := filepath.Join(tmpDir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("bind status socket: %w", err)
	}
	// The listener's recorded name is the temporary one; Close unlinks
	// the real path itself, and only when it is still ours.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(tmp, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("chmod status socket: %w", err)
	}
	if err := os.Link(tmp, path); err != nil {
		ln.Close()
		if errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("socket path %s appeared while qd was binding it; is another qd starting?", path)
		}
		return nil, fmt.Errorf("link status socket into place: %w", err)
	}
	return ln, nil
}

// privateDir creates a 0700 directory with a short random name in dir.
func privateDir(dir string) (string, error) {
	for range 16 {
		// 36^5 <= n < 36^6: always six base-36 characters.
		n := 60466176 + rand.Uint64N(2176782336-60466176)
		name := filepath.Join(dir, ".q"+strconv.FormatUint(n, 36))
		err := os.Mkdir(name, 0o700)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("create private bind directory: %w", err)
		}
		// Mkdir honours the umask, which can only have narrowed it.
		if err := os.Chmod(name, 0o700); err != nil {
			os.Remove(name)
			return "", fmt.Errorf("create private bind directory: %w", err)
		}
		return name, nil
	}
	return "", fmt.Errorf("create private bind directory in %s: too many name collisions", dir)
}

func fileID(path string) (dev, ino uint64, err error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0, 0, err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, fmt.Errorf("stat %s: no inode information", path)
	}
	return uint64(st.Dev), uint64(st.Ino), nil
}

// Close stops listening, removes the socket if the file at path is still
// the one this server bound, and releases the lock.
func (s *socket) Close() error {
	err := s.ln.Close()
	if errors.Is(err, net.ErrClosed) { // already closed by http.Server
		err = nil
	}
	if dev, ino, ferr := fileID(s.path); ferr == nil && dev == s.dev && ino == s.ino {
		if rerr := os.Remove(s.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			err = errors.Join(err, fmt.Errorf("remove status socket: %w", rerr))
		}
	}
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}
