package main

import (
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/systemd"
)

// serviceUser is the user the system service runs as (User= in the unit).
const serviceUser = "qd"

// checkSystemService refuses a system service that would fail at its
// first start: without the user qd, or with qd, the config, the state
// directory or the socket where the unit's sandbox hides them or the user
// qd cannot reach them.
func checkSystemService(stderr io.Writer, qd string, conf *config.Config) error {
	u, err := user.Lookup(serviceUser)
	if err != nil {
		return fmt.Errorf("the system service runs as the user %s, which does not exist: create it with "+
			"sudo useradd --system --home-dir /var/lib/qd --shell /usr/sbin/nologin %s (docs/service.md)", serviceUser, serviceUser)
	}
	for _, p := range []struct {
		path, what, fix string
		exec            bool
	}{
		{qd, "the qd binary", "install it in /usr/local/bin", true},
		{conf.Path, "the config", "put it in /etc/qd", false},
		{conf.StateDir, "the config's state_dir", "leave state_dir unset (the unit's /var/lib/qd)", false},
		{conf.Socket, "the config's socket", "leave socket unset (the unit's /run/qd/qd.sock)", false},
	} {
		if setting := hiddenBy(p.path); setting != "" {
			return fmt.Errorf("the system service cannot reach %s %s: its sandbox hides it (%s): %s, or lift %s with a drop-in (docs/service.md)",
				p.what, p.path, setting, p.fix, setting)
		}
		if p.path == conf.Path || p.exec {
			if err := reachableBy(u, p.path, p.exec); err != nil {
				return fmt.Errorf("the system service runs as the user %s, who cannot %s", serviceUser, err)
			}
		}
	}
	if setting := hiddenBy(u.HomeDir); setting != "" {
		fmt.Fprintf(stderr, "qd: warning: the home of the user %s, %s, is hidden from the service (%s): "+
			"its agents will find no ~/.ssh or ~/.gitconfig; give it /var/lib/qd (usermod --home /var/lib/qd %s), "+
			"or lift %s with a drop-in (docs/service.md)\n", serviceUser, u.HomeDir, setting, serviceUser, setting)
	}
	return nil
}

// hiddenBy names the setting of the system service's sandbox that hides
// path from it, or "".
func hiddenBy(path string) string {
	for _, dir := range []string{"/home", "/root", "/run/user"} {
		if path == dir || strings.HasPrefix(path, dir+"/") {
			return "ProtectHome=yes"
		}
	}
	for _, dir := range []string{"/tmp", "/var/tmp"} {
		if path == dir || strings.HasPrefix(path, dir+"/") {
			return "PrivateTmp=yes"
		}
	}
	return ""
}

// reachableBy says what keeps u from reading path (and running it, with
// exec): a directory above it u may not pass through, or the file's mode.
func reachableBy(u *user.User, path string, exec bool) error {
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	var gids []uint32
	ids, _ := u.GroupIds()
	for _, g := range append(ids, u.Gid) {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			gids = append(gids, uint32(n))
		}
	}
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if !permits(fi, uint32(uid), gids, 0o1) {
			return fmt.Errorf("pass through %s (mode %04o) to %s: chmod o+x %s, or move it", dir, fi.Mode().Perm(), path, dir)
		}
		if dir == filepath.Dir(dir) {
			break
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	switch {
	case exec && !permits(fi, uint32(uid), gids, 0o5):
		return fmt.Errorf("run %s (mode %04o): chmod a+rx %s", path, fi.Mode().Perm(), path)
	case !exec && !permits(fi, uint32(uid), gids, 0o4):
		return fmt.Errorf("read %s (mode %04o): chgrp %s %s && chmod g+r %s", path, fi.Mode().Perm(), serviceUser, path, path)
	}
	return nil
}

// permits reports whether the user uid, of the groups gids, has the
// permission bits (4 read, 2 write, 1 execute or search) on fi.
func permits(fi os.FileInfo, uid uint32, gids []uint32, bits os.FileMode) bool {
	st := fi.Sys().(*syscall.Stat_t)
	m := fi.Mode().Perm()
	switch {
	case st.Uid == uid:
		return m>>6&bits == bits
	case slices.Contains(gids, st.Gid):
		return m>>3&bits == bits
	}
	return m&bits == bits
}

// launchTarget is the launchd domain of the job and the job in it.
func (h *serviceHost) launchTarget() (domain, target string) {
	domain = "system"
	if h.user {
		domain = "gui/" + strconv.Itoa(os.Getuid())
	}
	return domain, domain + "/com.qd"
}

// plist renders the launchd job: a LaunchAgent logging to
// ~/Library/Logs/qd.log, or a LaunchDaemon run as the user who ran sudo,
// logging to /usr/local/var/log/qd, which it makes that user's.
func (h *serviceHost) plist(qd string, conf *config.Config) (string, error) {
	p := systemd.PlistParams{Daemon: !h.user, QD: qd, Config: conf.Path,
		Log: filepath.Join(h.home(), "Library", "Logs", "qd.log")}
	var owner *user.User
	if !h.user {
		name := h.env.Getenv("SUDO_USER")
		if name == "" || name == "root" {
			return "", fmt.Errorf("a LaunchDaemon runs as a user, taken from $SUDO_USER: run sudo qd service install from that user's account, or qd service install --user for a LaunchAgent")
		}
		var err error
		if owner, err = user.Lookup(name); err != nil {
			return "", fmt.Errorf("look up %s, whom the LaunchDaemon is to run as: %w", name, err)
		}
		p.UserName, p.Log = name, filepath.Join(h.root, systemd.DefaultLog)
	}
	if err := os.MkdirAll(filepath.Dir(p.Log), 0o755); err != nil {
		return "", err
	}
	if owner != nil {
		uid, _ := strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		if err := os.Chown(filepath.Dir(p.Log), uid, gid); err != nil {
			return "", err
		}
	}
	return systemd.Plist(p), nil
}
