package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// MustFakeLaunchctl puts a launchctl first on PATH that records each
// call's arguments in dir/calls; `print` succeeds only when dir/loaded
// exists, as for a job launchd has. It returns a function that reads and
// forgets the calls so far.
func MustFakeLaunchctl(t *testing.T, dir string) func() []string {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	os.MkdirAll(bin, 0o755)
	calls, loaded := filepath.Join(dir, "calls"), filepath.Join(dir, "loaded")
	script := "#!/bin/sh\necho \"$*\" >> " + calls + "\n[ \"$1\" = print ] && { [ -f " + loaded + " ] || exit 113; echo 'state = running'; }\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "launchctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	return func() []string {
		b, _ := os.ReadFile(calls)
		os.Remove(calls)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

// launchdHost is qd service on macOS, for a test on any system: HOME and
// the system's paths are under dir.
func launchdHost(t *testing.T, dir string, user bool, env map[string]string) (*serviceHost, *bytes.Buffer) {
	env["HOME"] = filepath.Join(dir, "home")
	var out bytes.Buffer
	e := newEnv(nil, &out, &out, func(k string) string { return env[k] })
	return &serviceHost{env: e, goos: "darwin", user: user, root: filepath.Join(dir, "root")}, &out
}

func wantLaunchctl(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("launchctl was run as\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// Ensure qd service on macOS, with a fake launchctl: install --user
// writes a LaunchAgent that runs this qd on the config and logs to
// ~/Library/Logs, enables and bootstraps it in the user's GUI domain (and
// boots out a loaded one first); status prints launchd's view; uninstall
// boots it out and removes it. As root, install writes a LaunchDaemon in
// the system domain run as the user who ran sudo.
func TestService_Launchd(t *testing.T) {
	dir := t.TempDir()
	calls := MustFakeLaunchctl(t, dir)
	conf := filepath.Join(dir, "qd.hcl")
	if err := os.WriteFile(conf, []byte("agent \"a\" {\n  command  = [\"/bin/true\"]\n  schedule = \"@every 2s\"\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	ctx := context.Background()
	gui := "gui/" + strconv.Itoa(os.Getuid())

	h, out := launchdHost(t, dir, true, map[string]string{})
	if err := h.install(ctx, conf); err != nil {
		t.Fatal(err)
	}
	plist := filepath.Join(dir, "home", "Library", "LaunchAgents", "com.qd.plist")
	wantLaunchctl(t, calls(), "print "+gui+"/com.qd", "enable "+gui+"/com.qd", "bootstrap "+gui+" "+plist)
	b, err := os.ReadFile(plist)
	if err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(dir, "home", "Library", "Logs", "qd.log")
	for _, want := range []string{"<string>" + exe + "</string>", "<string>" + conf + "</string>", "<string>" + log + "</string>"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the LaunchAgent lacks %s:\n%s", want, b)
		}
	}
	if bytes.Contains(b, []byte("<key>UserName</key>")) {
		t.Errorf("the LaunchAgent names a user:\n%s", b)
	}
	if _, err := os.Stat(filepath.Dir(log)); err != nil {
		t.Errorf("the log's directory was not made: %v", err)
	}

	os.WriteFile(filepath.Join(dir, "loaded"), nil, 0o644)
	if err := h.install(ctx, conf); err != nil {
		t.Fatal(err)
	}
	wantLaunchctl(t, calls(), "print "+gui+"/com.qd", "bootout "+gui+"/com.qd", "enable "+gui+"/com.qd", "bootstrap "+gui+" "+plist)
	out.Reset()
	if err := h.status(ctx); err != nil || !strings.Contains(out.String(), "installed: "+plist) || !strings.Contains(out.String(), "state = running") {
		t.Errorf("status: %v\n%s", err, out)
	}
	calls()
	if err := h.uninstall(ctx); err != nil {
		t.Fatal(err)
	}
	wantLaunchctl(t, calls(), "print "+gui+"/com.qd", "bootout "+gui+"/com.qd")
	if _, err := os.Stat(plist); !os.IsNotExist(err) {
		t.Errorf("the LaunchAgent is still there: %v", err)
	}

	t.Run("Daemon", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("needs root")
		}
		os.Remove(filepath.Join(dir, "loaded"))
		h, _ := launchdHost(t, dir, false, map[string]string{"SUDO_USER": "nobody"})
		if err := h.install(ctx, conf); err != nil {
			t.Fatal(err)
		}
		plist := filepath.Join(dir, "root", "Library", "LaunchDaemons", "com.qd.plist")
		wantLaunchctl(t, calls(), "print system/com.qd", "enable system/com.qd", "bootstrap system "+plist)
		b, _ := os.ReadFile(plist)
		if !bytes.Contains(b, []byte("<key>UserName</key>\n\t<string>nobody</string>")) ||
			!bytes.Contains(b, []byte("<string>"+filepath.Join(dir, "root", "usr/local/var/log/qd/qd.log")+"</string>")) {
			t.Errorf("the LaunchDaemon does not run as nobody, logging under /usr/local/var/log/qd:\n%s", b)
		}
		h, _ = launchdHost(t, dir, false, map[string]string{})
		if err := h.install(ctx, conf); err == nil || !strings.Contains(err.Error(), "$SUDO_USER") {
			t.Errorf("a LaunchDaemon with no $SUDO_USER: %v", err)
		}
	})
}
