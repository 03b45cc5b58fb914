package daemon

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// incarnation is this daemon's claim on its state directory, and the proof
// of which earlier daemons are gone. The state directory's daemon.lock is
// flocked for the daemon's whole life, so the kernel frees it the instant
// the process dies, however it dies; the file "incarnations" lists the
// instances of the daemons that held it before. Having the lock proves
// that every one of them is gone, so their runs may be abandoned at once.
// A daemon with another state directory (a second daemon of the same
// name, on this host or another) is never in that list.
type incarnation struct {
	dir     string
	mu      sync.Mutex // guards lock and earlier: see remake
	lock    *os.File
	self    earlier
	earlier []earlier // written by daemons of this state directory that are gone
	// fresh says the state directory held no record of incarnations: it is
	// new, or was deleted or replaced while no daemon ran.
	fresh bool
}

// earlier is a gone daemon's name and instance.
type earlier struct{ name, instance string }

const (
	lockName         = "daemon.lock"
	incarnationsName = "incarnations"
)

// beginIncarnation locks stateDir for this daemon, reads the earlier
// incarnations and records this one. It fails, naming the holder, when
// another daemon uses stateDir.
func beginIncarnation(stateDir, name, instance string) (*incarnation, error) {
	inc := &incarnation{dir: stateDir, self: earlier{name, instance}}
	f, err := inc.lockDir()
	if err != nil {
		return nil, err
	}
	inc.lock = f
	_, statErr := os.Stat(filepath.Join(stateDir, incarnationsName))
	inc.fresh = errors.Is(statErr, os.ErrNotExist)
	inc.earlier, err = readIncarnations(filepath.Join(stateDir, incarnationsName))
	if err == nil {
		err = inc.write(append(slices.Clip(inc.earlier), inc.self))
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return inc, nil
}

// lockDir creates the state directory and its lock file, flocks it and
// writes who holds it.
func (inc *incarnation) lockDir() (*os.File, error) {
	if err := os.MkdirAll(inc.dir, 0o700); err != nil {
		return nil, fmt.Errorf("create state directory: %w", err)
	}
	path := filepath.Join(inc.dir, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open state directory lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is in use by another qd daemon (%s): give each daemon its own state_dir (and socket); see docs/service.md",
				inc.dir, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("lock state directory %s: %w", inc.dir, err)
	}
	host, _ := os.Hostname()
	who := fmt.Sprintf("name %s, host %s, pid %d, instance %s, started %s\n",
		inc.self.name, host, os.Getpid(), inc.self.instance, time.Now().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(who), 0)
	}
	return f, nil
}

// intact reports whether the state directory still holds the lock file
// this daemon has locked: false once the directory was deleted, or the
// file replaced, under it.
func (inc *incarnation) intact() bool {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	fi, err := os.Stat(filepath.Join(inc.dir, lockName))
	if err != nil {
		return false
	}
	held, err := inc.lock.Stat()
	return err == nil && os.SameFile(fi, held)
}

// remake recreates a state directory deleted under the daemon: a new lock
// file locked by this daemon, and the record of this incarnation and of
// the earlier ones not yet released, so that a later start still proves
// this one gone. It keeps the old lock when another daemon took the new
// one first.
func (inc *incarnation) remake() error {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	f, err := inc.lockDir()
	if err != nil {
		return err
	}
	if err := inc.write(append(slices.Clip(inc.earlier), inc.self)); err != nil {
		f.Close()
		return err
	}
	inc.lock.Close()
	inc.lock = f
	return nil
}

func readIncarnations(path string) ([]earlier, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read earlier incarnations: %w", err)
	}
	var out []earlier
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if name, inst, ok := strings.Cut(strings.TrimSpace(sc.Text()), " "); ok && name != "" && inst != "" {
			out = append(out, earlier{name, inst})
		}
	}
	return out, nil
}

// write replaces the list of incarnations, durably.
func (inc *incarnation) write(list []earlier) error {
	var b strings.Builder
	for _, e := range list {
		fmt.Fprintf(&b, "%s %s\n", e.name, e.instance)
	}
	path := filepath.Join(inc.dir, incarnationsName)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.WriteString(b.String())
		if err == nil {
			err = f.Sync()
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("record incarnation in %s: %w", inc.dir, err)
	}
	return nil
}

// byName groups the earlier incarnations' instances by daemon name.
func (inc *incarnation) byName() map[string][]string {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	m := map[string][]string{}
	for _, e := range inc.earlier {
		m[e.name] = append(m[e.name], e.instance)
	}
	return m
}

// released forgets the earlier incarnations once their runs are abandoned.
func (inc *incarnation) released() error {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	if err := inc.write([]earlier{inc.self}); err != nil {
		return err
	}
	inc.earlier = nil
	return nil
}

// close gives up the state directory. The record of this incarnation stays,
// so that the next daemon abandons whatever this one could not settle.
func (inc *incarnation) close() {
	inc.mu.Lock()
	defer inc.mu.Unlock()
	inc.lock.Close()
}
