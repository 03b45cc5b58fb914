package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/systemd"
)

// serviceHost is the service manager `qd service` speaks to: systemd or
// launchd, the user's own or the system's.
type serviceHost struct {
	env  *Env
	goos string // "linux" or "darwin"
	user bool   // the user's service manager, else the system's
	root string // put before the system's paths: "" but in tests
}

func newServiceHost(env *Env, user bool) (*serviceHost, error) {
	h := &serviceHost{env: env, goos: runtime.GOOS, user: user, root: serviceRoot()}
	if h.goos != "linux" && h.goos != "darwin" {
		return nil, fmt.Errorf("qd service knows systemd (Linux) and launchd (macOS), not %s: run qd run in the foreground under your service manager (docs/service.md)", h.goos)
	}
	return h, nil
}

func (h *serviceHost) launchd() bool { return h.goos == "darwin" }

// kind names the service in messages.
func (h *serviceHost) kind() string {
	switch {
	case h.launchd() && h.user:
		return "LaunchAgent com.qd"
	case h.launchd():
		return "LaunchDaemon com.qd"
	case h.user:
		return "user service qd.service"
	}
	return "system service qd.service"
}

// flag is the --user of the commands that act on this service, or "".
func (h *serviceHost) flag() string {
	if h.user {
		return " --user"
	}
	return ""
}

// file is where the service file goes.
func (h *serviceHost) file() string {
	switch {
	case h.launchd() && h.user:
		return filepath.Join(h.home(), "Library", "LaunchAgents", "com.qd.plist")
	case h.launchd():
		return filepath.Join(h.root, "/Library/LaunchDaemons/com.qd.plist")
	case h.user:
		dir := h.env.Getenv("XDG_CONFIG_HOME")
		if dir == "" {
			dir = filepath.Join(h.home(), ".config")
		}
		return filepath.Join(dir, "systemd", "user", "qd.service")
	}
	return filepath.Join(h.root, "/etc/systemd/system/qd.service")
}

func (h *serviceHost) home() string {
	if home := h.env.Getenv("HOME"); home != "" {
		return home
	}
	home, _ := os.UserHomeDir()
	return home
}

// needsRoot refuses to change the system's service but as root.
func (h *serviceHost) needsRoot() error {
	if h.user || os.Geteuid() == 0 {
		return nil
	}
	return fmt.Errorf("the %s is the system's: run this with sudo, or add --user for a service of your own", h.kind())
}

// install checks the config, writes the service file and starts the
// service.
func (h *serviceHost) install(ctx context.Context, configPath string) error {
	if err := h.needsRoot(); err != nil {
		return err
	}
	qd, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find this qd binary, which the service is to run: %w", err)
	}
	conf, err := h.config(configPath)
	if err != nil {
		return err
	}
	text, err := h.render(qd, conf)
	if err != nil {
		return err
	}
	file := h.file()
	if err := writeAtomic(file, text); err != nil {
		return err
	}
	if err := h.start(ctx, file); err != nil {
		return err
	}
	fmt.Fprintf(h.env.Stdout, "installed the %s (%s), running %s --config %s; see qd service status%s\n",
		h.kind(), file, qd, conf.Path, h.flag())
	return nil
}

// config finds and checks the config the service is to run.
func (h *serviceHost) config(path string) (*config.Config, error) {
	if path == "" {
		path = h.env.Getenv("QD_CONFIG")
	}
	if path == "" {
		found, tried, err := config.Find()
		if found == "" {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, usageErrorf("no config file for the service (looked for %s): give --config FILE", strings.Join(tried, ", "))
			}
			return nil, err
		}
		path = found
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, err
	}
	conf, err := config.Load(abs)
	if err != nil {
		return nil, configError(err)
	}
	return conf, nil
}

// render makes the service file's text, once the system's service has
// been checked against what its user and its sandbox can reach.
func (h *serviceHost) render(qd string, conf *config.Config) (string, error) {
	if h.launchd() {
		return h.plist(qd, conf)
	}
	if !h.user {
		if err := checkSystemService(h.env.Stderr, qd, conf); err != nil {
			return "", err
		}
	}
	path := h.env.Getenv("PATH")
	if dir := filepath.Dir(qd); !slices.Contains(filepath.SplitList(path), dir) {
		path = dir + string(filepath.ListSeparator) + path // agents call qd (qd heartbeat)
	}
	return systemd.Unit(systemd.UnitParams{User: h.user, QD: qd, Config: conf.Path, Path: path}), nil
}

// start makes the service manager take the new file and (re)start it.
func (h *serviceHost) start(ctx context.Context, file string) error {
	if h.launchd() {
		domain, target := h.launchTarget()
		if h.run(ctx, io.Discard, "launchctl", "print", target) == nil {
			if err := h.run(ctx, h.env.Stderr, "launchctl", "bootout", target); err != nil {
				return err
			}
		}
		if err := h.run(ctx, h.env.Stderr, "launchctl", "enable", target); err != nil {
			return err
		}
		return h.run(ctx, h.env.Stderr, "launchctl", "bootstrap", domain, file)
	}
	for _, args := range [][]string{{"daemon-reload"}, {"enable", "qd.service"}, {"restart", "qd.service"}} {
		if err := h.systemctl(ctx, h.env.Stderr, args...); err != nil {
			return err
		}
	}
	return nil
}

// status shows the service file and what the service manager says.
func (h *serviceHost) status(ctx context.Context) error {
	file := h.file()
	if _, err := os.Stat(file); err != nil {
		other := &serviceHost{env: h.env, goos: h.goos, user: !h.user, root: h.root}
		also := ""
		if _, err := os.Stat(other.file()); err == nil {
			also = fmt.Sprintf("; the %s is: qd service status%s", other.kind(), other.flag())
		}
		return fmt.Errorf("no %s is installed (no %s): qd service install%s installs it%s", h.kind(), file, h.flag(), also)
	}
	fmt.Fprintf(h.env.Stdout, "installed: %s\n", file)
	var err error
	if h.launchd() {
		_, target := h.launchTarget()
		err = h.run(ctx, h.env.Stdout, "launchctl", "print", target)
	} else {
		err = h.systemctl(ctx, h.env.Stdout, "status", "--no-pager", "qd.service")
	}
	if errors.As(err, new(*exec.ExitError)) {
		return &ExitError{Code: ExitFailure, Err: errQuiet} // not running: it said so
	}
	return err
}

// uninstall stops and disables the service and removes its file.
func (h *serviceHost) uninstall(ctx context.Context) error {
	if err := h.needsRoot(); err != nil {
		return err
	}
	file := h.file()
	if _, err := os.Stat(file); errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(h.env.Stdout, "no %s is installed (no %s)\n", h.kind(), file)
		return nil
	}
	if h.launchd() {
		if _, target := h.launchTarget(); h.run(ctx, io.Discard, "launchctl", "print", target) == nil {
			if err := h.run(ctx, h.env.Stderr, "launchctl", "bootout", target); err != nil {
				return err
			}
		}
	} else if err := h.systemctl(ctx, h.env.Stderr, "disable", "--now", "qd.service"); err != nil {
		return err
	}
	if err := os.Remove(file); err != nil {
		return err
	}
	if !h.launchd() {
		if err := h.systemctl(ctx, h.env.Stderr, "daemon-reload"); err != nil {
			return err
		}
	}
	fmt.Fprintf(h.env.Stdout, "stopped the %s and removed %s; the config and the state directory are left as they were\n", h.kind(), file)
	return nil
}

func (h *serviceHost) systemctl(ctx context.Context, out io.Writer, args ...string) error {
	if h.user {
		args = append([]string{"--user"}, args...)
	}
	return h.run(ctx, out, "systemctl", args...)
}

// run runs a command of the service manager, its output to out.
func (h *serviceHost) run(ctx context.Context, out io.Writer, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if out == h.env.Stdout {
		cmd.Stderr = h.env.Stderr
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// writeAtomic writes a service file: whole, or not at all.
func writeAtomic(path, text string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
