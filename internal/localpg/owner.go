package localpg

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// SystemUser is the user a cluster made by root runs as, created when
// missing; nobody when it cannot be.
const SystemUser = "qd"

// owner is the user a cluster runs as; its name is also the role qd
// connects as.
type owner struct {
	uid, gid uint32
	name     string
}

// self reports whether this process runs as the owner, so that commands
// need no change of user.
func (o owner) self() bool { return int(o.uid) == os.Geteuid() }

func ownerOf(u *user.User) (owner, error) {
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return owner{}, fmt.Errorf("user %s: unexpected uid %q or gid %q", u.Username, u.Uid, u.Gid)
	}
	return owner{uid: uint32(uid), gid: uint32(gid), name: u.Username}, nil
}

// existingOwner is the owner of the data directory at path. Only that
// user and root may use it.
func existingOwner(path string) (owner, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return owner{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	u, err := user.LookupId(strconv.FormatUint(uint64(st.Uid), 10))
	if err != nil {
		return owner{}, fmt.Errorf("the private cluster %s belongs to uid %d, which has no user name: %w", path, st.Uid, err)
	}
	o, err := ownerOf(u)
	if err != nil {
		return owner{}, err
	}
	if o.uid == 0 {
		return owner{}, fmt.Errorf("the private cluster %s belongs to root, and PostgreSQL refuses to run as root: remove it, or chown -R it to another user", path)
	}
	if euid := os.Geteuid(); euid != 0 && !o.self() {
		return owner{}, fmt.Errorf("the private cluster %s belongs to user %s: run qd as %s or as root, or set QD_DATABASE_URL", path, o.name, o.name)
	}
	return o, nil
}

// newOwner chooses the owner of a cluster about to be made: this process's
// user, or for root the system user qd (made now when missing), else
// nobody.
func newOwner() (owner, error) {
	if os.Geteuid() != 0 {
		u, err := user.Current()
		if err != nil {
			return owner{}, fmt.Errorf("look up the current user, whom the private cluster would belong to: %w", err)
		}
		return ownerOf(u)
	}
	if u, err := user.Lookup(SystemUser); err == nil {
		return ownerOf(u)
	}
	addErr := addSystemUser()
	if u, err := user.Lookup(SystemUser); err == nil {
		return ownerOf(u)
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return owner{}, fmt.Errorf("qd runs as root, and initdb refuses root: creating user %s failed (%v) and there is no user nobody", SystemUser, addErr)
	}
	return ownerOf(u)
}

// addSystemUser creates the system user qd with its own group, no home
// and no login, as docs/service.md does for the service, unless a racing
// process has. Racing useradds all succeed and may leave the user with
// another uid than one of them saw, so qd processes take turns: they
// flock /etc/.pwd.lock, the file useradd itself locks with fcntl(2), a
// lock of another kind that does not get in its way.
func addSystemUser() error {
	f, err := os.OpenFile("/etc/.pwd.lock", os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open /etc/.pwd.lock: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("lock /etc/.pwd.lock: %w", err)
	}
	if _, err := user.Lookup(SystemUser); err == nil {
		return nil
	}
	path, err := exec.LookPath("useradd")
	if err != nil {
		path = "/usr/sbin/useradd"
	}
	out, err := exec.Command(path, "--system", "--user-group", "--no-create-home",
		"--home-dir", "/var/lib/qd", "--shell", "/usr/sbin/nologin", SystemUser).CombinedOutput()
	if err != nil {
		return fmt.Errorf("useradd %s: %v: %s", SystemUser, err, bytes.TrimSpace(out))
	}
	return nil
}

// command runs name as the owner, in dir, with this process's environment
// less the PG* variables (PGPORT or PGDATA would change what the server
// does) and the service manager's (a postgres built with systemd support
// would send READY=1 to a unit that is qd's, not its own).
func (o owner) command(dir, name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PG") && !serviceVar(kv) {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if !o.self() {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: []uint32{}}}
	}
	return cmd
}

// serviceVar reports whether kv is one of the variables through which
// systemd speaks to the process it started, and to that one alone.
func serviceVar(kv string) bool {
	name, _, _ := strings.Cut(kv, "=")
	switch name {
	case "NOTIFY_SOCKET", "WATCHDOG_PID", "WATCHDOG_USEC", "LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES":
		return true
	}
	return false
}

// chown gives path to the owner when this process is someone else (root).
func (o owner) chown(path string) error {
	if o.self() {
		return nil
	}
	return os.Lchown(path, int(o.uid), int(o.gid))
}
