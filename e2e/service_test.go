package e2e

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/systemd"
)

// fakeManager puts a fake systemctl first on PATH, in dir/bin: it records
// each call's arguments as a line of dir/calls and, for status, exits with
// the code in dir/status (0 when there is none). It returns the PATH and a
// function that reads and forgets the calls so far.
func fakeManager(t *testing.T, dir string) (path string, calls func() []string) {
	t.Helper()
	bin := filepath.Join(dir, "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	log, status := filepath.Join(dir, "calls"), filepath.Join(dir, "status")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase \" $* \" in *\" status \"*)\n" +
		"  echo '● qd.service - qd queue supervisor'\n  [ -f " + status + " ] && exit $(cat " + status + ")\nesac\nexit 0\n"
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin + ":" + os.Getenv("PATH"), func() []string {
		b, _ := os.ReadFile(log)
		os.Remove(log)
		return strings.Split(strings.TrimSpace(string(b)), "\n")
	}
}

// serviceQD runs the built qd with env added to the test's environment.
func serviceQD(t *testing.T, qd string, env []string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(qd, args...)
	cmd.Env = append(testkit.Environ(), env...)
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

func wantCalls(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("systemctl was run as\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// verifyUnit runs systemd-analyze verify on a unit qd service install
// wrote (--user for a user unit); anything it prints is a fault.
func verifyUnit(t *testing.T, path string, user bool) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not installed: the unit is not verified")
		return
	}
	args := []string{"verify", path}
	cmd := exec.Command(analyze)
	if user {
		args = append([]string{"--user"}, args...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+t.TempDir())
	}
	cmd.Args = append(cmd.Args, args...)
	if out, err := cmd.CombinedOutput(); err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify %s: %v\n%s", path, err, out)
	}
}

// Ensure qd service install --user, with the quick start's config, writes
// the user unit naming this qd and the config's absolute path and with
// this shell's PATH, which systemd accepts, then reloads, enables and
// (re)starts it; that status shows it and says when it does not run; and
// that uninstall stops, disables and removes it.
func TestService_User(t *testing.T) {
	t.Parallel()
	qd := testkit.MustBuild(t)
	dir := testkit.MustShortDir(t, "qd-svc-")
	work := filepath.Join(dir, "work")
	os.MkdirAll(work, 0o755)
	writeFile(t, filepath.Join(work, "qd.hcl"), "socket    = \"qd.sock\"\nstate_dir = \"state\"\n\nagent \"hello\" {\n  command  = [\"/bin/true\"]\n  schedule = \"@every 2s\"\n}\n")
	path, calls := fakeManager(t, dir)
	env := []string{"HOME=" + filepath.Join(dir, "home"), "XDG_CONFIG_HOME=", "PATH=" + path}
	unit := filepath.Join(dir, "home", ".config", "systemd", "user", "qd.service")

	out, errOut, code := serviceQD(t, qd, env, "service", "install", "--user", "--config", filepath.Join(work, "qd.hcl"))
	if code != 0 {
		t.Fatalf("qd service install --user: exit %d: %s%s", code, out, errOut)
	}
	wantCalls(t, calls(), "--user daemon-reload", "--user enable qd.service", "--user restart qd.service")
	text := readFile(t, unit)
	if want := systemd.Unit(systemd.UnitParams{User: true, QD: qd, Config: filepath.Join(work, "qd.hcl"),
		Path: filepath.Dir(qd) + ":" + path}); text != want {
		t.Errorf("the user unit is not the template's:\n%s", text)
	}
	if !strings.Contains(out, unit) {
		t.Errorf("install does not say where it wrote the unit: %s", out)
	}
	verifyUnit(t, unit, true)

	out, _, code = serviceQD(t, qd, env, "service", "status", "--user")
	if code != 0 || !strings.Contains(out, "installed: "+unit) || !strings.Contains(out, "qd queue supervisor") {
		t.Errorf("qd service status --user: exit %d:\n%s", code, out)
	}
	wantCalls(t, calls(), "--user status --no-pager qd.service")
	writeFile(t, filepath.Join(dir, "status"), "3")
	if _, _, code := serviceQD(t, qd, env, "service", "status", "--user"); code != 1 {
		t.Errorf("status of a service that does not run: exit %d, want 1", code)
	}
	calls()
	if _, errOut, code := serviceQD(t, qd, env, "service", "status"); code != 1 || !strings.Contains(errOut, "the user service qd.service is: qd service status --user") {
		t.Errorf("status of the system service, with a user one installed: exit %d: %s", code, errOut)
	}

	out, errOut, code = serviceQD(t, qd, env, "service", "uninstall", "--user")
	if code != 0 {
		t.Fatalf("qd service uninstall --user: exit %d: %s%s", code, out, errOut)
	}
	wantCalls(t, calls(), "--user disable --now qd.service", "--user daemon-reload")
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("the unit is still there after uninstall: %v", err)
	}
	if _, errOut, code := serviceQD(t, qd, env, "service", "status", "--user"); code != 1 || !strings.Contains(errOut, "no user service qd.service is installed") {
		t.Errorf("status after uninstall: exit %d: %s", code, errOut)
	}
}

// Ensure qd service install, as root, writes the system unit (the
// template byte for byte but for ExecStart=), which systemd accepts and
// scores at most 5.0, and reloads, enables and (re)starts it; and that it
// refuses what the unit could not run: an invalid config (exit 2, with
// file:line), a config the unit's private /tmp hides, and one the user qd
// cannot reach.
func TestService_System(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := user.Lookup("qd"); err != nil {
		if out, err := exec.Command("useradd", "--system", "--user-group", "--no-create-home", "--home-dir", "/var/lib/qd",
			"--shell", "/usr/sbin/nologin", "qd").CombinedOutput(); err != nil {
			t.Skipf("no user qd, and useradd failed: %v: %s", err, out)
		}
	}
	t.Parallel()
	built := testkit.MustBuild(t)
	// Outside /tmp, which the unit's PrivateTmp=yes hides, and open to qd.
	opt, err := os.MkdirTemp("/var/lib", "qd-svc-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(opt) })
	os.Chmod(opt, 0o755)
	qd := filepath.Join(opt, "qd")
	mustCopy(t, built, qd, 0, 0)
	os.Chmod(qd, 0o755)
	conf := filepath.Join(opt, "qd.hcl")
	writeFile(t, conf, "agent \"hello\" {\n  command  = [\"/bin/true\"]\n  schedule = \"@every 2s\"\n}\n")
	dir := testkit.MustShortDir(t, "qd-svc-")
	path, calls := fakeManager(t, dir)
	root := filepath.Join(dir, "root")
	env := []string{"QD_TEST_SERVICE_ROOT=" + root, "PATH=" + path}
	unit := filepath.Join(root, "etc", "systemd", "system", "qd.service")

	out, errOut, code := serviceQD(t, qd, env, "service", "install", "--config", conf)
	if code != 0 {
		t.Fatalf("qd service install: exit %d: %s%s", code, out, errOut)
	}
	wantCalls(t, calls(), "daemon-reload", "enable qd.service", "restart qd.service")
	text := readFile(t, unit)
	if want := systemd.Unit(systemd.UnitParams{QD: qd, Config: conf}); text != want {
		t.Errorf("the system unit is not the template's:\n%s", text)
	}
	if !strings.Contains(text, "\nExecStart="+qd+" run --config "+conf+"\n") || !strings.Contains(text, "\nUser=qd\n") {
		t.Errorf("the system unit does not run %s --config %s as qd:\n%s", qd, conf, text)
	}
	verifyUnit(t, unit, false)
	if analyze, err := exec.LookPath("systemd-analyze"); err == nil {
		out, _ := exec.Command(analyze, "security", "--offline=yes", unit).CombinedOutput()
		m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
		if v, err := strconv.ParseFloat(string(m[1]), 64); m == nil || err != nil || v > 5.0 {
			t.Errorf("systemd-analyze security of the written unit:\n%s", out)
		}
	}

	t.Run("Refusals", func(t *testing.T) {
		bad := filepath.Join(opt, "bad.hcl")
		writeFile(t, bad, "agent \"x\" {\n  schedule = \"@every 2s\"\n}\n")
		hidden := filepath.Join(dir, "qd.hcl") // under /tmp
		writeFile(t, hidden, "")
		closed := filepath.Join(opt, "closed")
		os.Mkdir(closed, 0o700)
		writeFile(t, filepath.Join(closed, "qd.hcl"), "")
		for _, c := range []struct {
			config string
			code   int
			want   string
		}{
			{bad, 2, bad + ":1: agent \"x\": command is required"},
			{hidden, 1, "its sandbox hides it (PrivateTmp=yes)"},
			{filepath.Join(closed, "qd.hcl"), 1, "who cannot pass through " + closed},
		} {
			_, errOut, code := serviceQD(t, qd, env, "service", "install", "--config", c.config)
			if code != c.code || !strings.Contains(errOut, c.want) {
				t.Errorf("install with %s: exit %d, %q; want exit %d and %q", c.config, code, errOut, c.code, c.want)
			}
		}
		if got := calls(); len(got) != 1 || got[0] != "" {
			t.Errorf("a refused install ran systemctl: %q", got)
		}
		if readFile(t, unit) != text {
			t.Error("a refused install changed the unit")
		}
	})

	out, errOut, code = serviceQD(t, qd, env, "service", "uninstall")
	if code != 0 {
		t.Fatalf("qd service uninstall: exit %d: %s%s", code, out, errOut)
	}
	wantCalls(t, calls(), "disable --now qd.service", "daemon-reload")
	if _, err := os.Stat(unit); !os.IsNotExist(err) {
		t.Errorf("the unit is still there after uninstall: %v", err)
	}
}
