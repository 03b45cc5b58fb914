package localpg

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// port names the socket, .s.PGSQL.5432. The server listens on no TCP
// port, and its socket directory is its own, so every cluster may use the
// same number.
const port = 5432

func socketPath(dir string) string {
	return filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(port))
}

// socketDir is where the server's socket goes: the cluster's directory, or
// when that path would be too long for a socket, a directory under /tmp
// named after the cluster's path.
func (c *Cluster) socketDir() string {
	if len(socketPath(c.dir)) <= maxSocketPath {
		return c.dir
	}
	sum := sha256.Sum256([]byte(c.dir))
	return filepath.Join("/tmp", "qd-pg-"+hex.EncodeToString(sum[:6]))
}

// prepare gives the cluster's directory to the owner and, when the owner
// is not this process's user, checks that it can reach it.
func (c *Cluster) prepare(o owner) error {
	if err := o.chown(c.dir); err != nil {
		return fmt.Errorf("give %s to user %s: %w", c.dir, o.name, err)
	}
	if err := os.Chmod(c.dir, 0o700); err != nil {
		return err
	}
	if o.self() {
		return nil
	}
	return reachable(o, c.dir)
}

// reachable checks that the owner may pass through every directory above
// dir. The state directory, dir's parent, is qd's own: when it is closed
// to the owner it is opened for passing through (o+x, not for listing). A
// directory further up is not qd's to change, and is reported.
func reachable(o owner, dir string) error {
	state := filepath.Dir(dir)
	for p := state; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		if !canSearch(o, fi) {
			if p != state {
				return fmt.Errorf("the private cluster %s runs as user %s, which cannot pass through %s (mode %04o): chmod o+x %s, or choose another state_dir, or set QD_DATABASE_URL",
					dir, o.name, p, fi.Mode().Perm(), p)
			}
			if err := os.Chmod(p, fi.Mode().Perm()|0o001); err != nil {
				return fmt.Errorf("let user %s pass through %s: %w", o.name, p, err)
			}
		}
		if parent := filepath.Dir(p); parent == p {
			return nil
		}
	}
}

// canSearch reports whether the owner, with its primary group alone, may
// pass through the directory fi.
func canSearch(o owner, fi os.FileInfo) bool {
	st := fi.Sys().(*syscall.Stat_t)
	m := fi.Mode().Perm()
	switch {
	case st.Uid == o.uid:
		return m&0o100 != 0
	case st.Gid == o.gid:
		return m&0o010 != 0
	}
	return m&0o001 != 0
}

// ensureSocketDir makes the short socket directory under /tmp, or checks
// that the one there is a real directory of the owner's that nobody else
// may write to: /tmp is shared, and the socket is how qd reaches its data.
func ensureSocketDir(dir string, o owner) error {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		return o.chown(dir)
	}
	if !os.IsExist(err) {
		return fmt.Errorf("make the socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || st.Uid != o.uid || fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("socket directory %s is not a private directory of user %s: remove it, or choose a shorter state_dir", dir, o.name)
	}
	return nil
}
