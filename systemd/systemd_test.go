package systemd

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/config"
)

const plistPath = "com.qd.plist"

// unit is a parsed systemd unit file: section → key → values in order.
type unit map[string]map[string][]string

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// MustParseUnit parses the text of a unit; path names it in errors.
func MustParseUnit(tb testing.TB, path, text string) unit {
	tb.Helper()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[' && line[len(line)-1] == ']':
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			key, value, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				tb.Fatalf("%s:%d: not a key=value line in a section: %q", path, n, line)
			}
			key = strings.TrimSpace(key)
			u[section][key] = append(u[section][key], strings.TrimSpace(value))
		}
	}
	if err := sc.Err(); err != nil {
		tb.Fatal(err)
	}
	return u
}

// systemdSeconds parses the few time spans the unit uses ("45s", "2min").
func systemdSeconds(tb testing.TB, v string) time.Duration {
	tb.Helper()
	d, err := time.ParseDuration(strings.Replace(v, "min", "m", 1))
	if err != nil {
		tb.Fatalf("parse time span %q: %v", v, err)
	}
	return d
}

// MustAnalyze returns the systemd-analyze on this machine, or skips.
func MustAnalyze(tb testing.TB) string {
	tb.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("systemd-analyze not installed")
		}
		tb.Skip("systemd-analyze not installed")
	}
	return analyze
}

// MustWriteUnit writes text as dir/qd.service, runnable: systemd-analyze
// checks that ExecStart's program exists, so it names this test binary.
func MustWriteUnit(tb testing.TB, dir string, p UnitParams) string {
	tb.Helper()
	exe, err := os.Executable()
	if err != nil {
		tb.Fatal(err)
	}
	if p.QD == "" {
		p.QD = exe
	}
	path := filepath.Join(dir, "qd.service")
	if err := os.WriteFile(path, []byte(Unit(p)), 0o644); err != nil {
		tb.Fatal(err)
	}
	return path
}

// verify runs systemd-analyze verify on the unit at path (--user for a
// user unit) and returns what it printed: unknown keys and bad values
// are printed as warnings, so anything printed is a fault.
func verify(tb testing.TB, path string, user bool) string {
	tb.Helper()
	args := []string{"verify", path}
	cmd := exec.Command(MustAnalyze(tb))
	if user {
		args = append([]string{"--user"}, args...)
		runtime := tb.TempDir() // the user manager needs a runtime directory
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+runtime)
	}
	cmd.Args = append(cmd.Args, args...)
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		out = []byte(err.Error())
	}
	return string(bytes.TrimSpace(out))
}

func TestUnit_Verify(t *testing.T) {
	// Ensure systemd itself accepts every line of the system and of the
	// user service, as qd service install writes them, paths with a
	// blank, a dollar and a percent sign included.
	odd := filepath.Join(t.TempDir(), "my $HOME 100%")
	if err := os.MkdirAll(odd, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, _ := os.Executable()
	qd := filepath.Join(odd, "qd")
	if err := os.Symlink(exe, qd); err != nil {
		t.Fatal(err)
	}
	for _, p := range []UnitParams{
		{Config: DefaultConfig},
		{User: true, Config: "/home/me/work/qd.hcl", Path: "/home/me/bin:/usr/bin:/bin"},
		{User: true, QD: qd, Config: filepath.Join(odd, "qd.hcl"), Path: odd + ":/usr/bin"},
	} {
		path := MustWriteUnit(t, t.TempDir(), p)
		if out := verify(t, path, p.User); out != "" {
			t.Errorf("systemd-analyze verify of %+v:\n%s\n%s", p, out, Unit(p))
		}
	}
}

// exposure runs systemd-analyze security --offline=yes on the unit at
// path and returns its overall exposure, 0 (safe) to 10.
func exposure(tb testing.TB, path string) float64 {
	tb.Helper()
	out, err := exec.Command(MustAnalyze(tb), "security", "--offline=yes", path).CombinedOutput()
	if err != nil {
		tb.Fatalf("systemd-analyze security: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		tb.Fatalf("systemd-analyze security said no overall exposure:\n%s", out)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

func TestUnit_Security(t *testing.T) {
	// Ensure the system service scores at most 5.0, MEDIUM, in systemd's
	// own assessment, and that the score its comments state is the one
	// this systemd gives.
	path := MustWriteUnit(t, t.TempDir(), UnitParams{Config: DefaultConfig})
	got := exposure(t, path)
	t.Logf("systemd-analyze security --offline=yes: %.1f", got)
	if got > 5.0 {
		t.Errorf("the system service's exposure is %.1f, want at most 5.0", got)
	}
	if want := fmt.Sprintf("scores this unit %.1f", got); !strings.Contains(UnitFile, want) {
		scoreNotStated(t, "qd.service does not say it "+want)
	}
}

// scoredWith is the systemd whose scores the unit's comments and
// docs/service.md state; another one may weigh settings otherwise.
const scoredWith = "systemd 252 "

// scoreNotStated fails the test when this systemd is the one whose scores
// are stated, and only logs otherwise.
func scoreNotStated(t *testing.T, msg string) {
	t.Helper()
	out, _ := exec.Command(MustAnalyze(t), "--version").Output()
	if strings.HasPrefix(string(out), scoredWith) {
		t.Error(msg)
		return
	}
	t.Logf("%s (scores are stated for %s; this is %s)", msg, scoredWith, strings.SplitN(string(out), "\n", 2)[0])
}

func TestUnit_Render(t *testing.T) {
	t.Run("SystemIsTheFile", func(t *testing.T) {
		// Ensure the system service with the shipped paths is the shipped
		// file itself: one source for both.
		if got := Unit(UnitParams{QD: DefaultQD, Config: DefaultConfig}); got != UnitFile {
			t.Errorf("the system service differs from qd.service:\n%s", got)
		}
	})
	t.Run("User", func(t *testing.T) {
		// Ensure the user service leaves out the user, the sandbox and the
		// system's targets, and takes in its own lines.
		got := Unit(UnitParams{User: true, QD: "/home/me/go/bin/qd", Config: "/home/me/w/qd.hcl", Path: "/home/me/go/bin:/usr/bin"})
		if regexp.MustCompile(`(?m)^#\[`).MatchString(got) {
			t.Errorf("the user service has a template mark:\n%s", got)
		}
		for _, gone := range []string{"User=", "Group=", "NoNewPrivileges", "ProtectSystem", "multi-user.target", "network-online"} {
			if strings.Contains(got, gone) {
				t.Errorf("the user service has %q:\n%s", gone, got)
			}
		}
		for _, want := range []string{"\nExecStart=/home/me/go/bin/qd run --config /home/me/w/qd.hcl\n",
			"\nEnvironment=PATH=/home/me/go/bin:/usr/bin\n", "\nWantedBy=default.target\n", "\nDelegate=yes\n", "\nType=notify\n"} {
			if !strings.Contains(got, want) {
				t.Errorf("the user service lacks %q:\n%s", want, got)
			}
		}
	})
	t.Run("Quoting", func(t *testing.T) {
		// Ensure a path that is not one plain word stays one word.
		got := Unit(UnitParams{QD: "/opt/my qd/qd", Config: `/etc/100%/$x "y".hcl`})
		if want := `ExecStart="/opt/my qd/qd" run --config "/etc/100%%/$$x \"y\".hcl"` + "\n"; !strings.Contains(got, want) {
			t.Errorf("ExecStart is not %q:\n%s", want, got)
		}
	})
}

func TestUnit_Directives(t *testing.T) {
	s := "Service"
	system := MustParseUnit(t, "system", UnitFile)
	user := MustParseUnit(t, "user", Unit(UnitParams{User: true, QD: DefaultQD, Config: "/home/me/qd.hcl"}))

	t.Run("Required", func(t *testing.T) {
		// Ensure the directives qd's lifecycle depends on are in both.
		for name, u := range map[string]unit{"system": system, "user": user} {
			for key, want := range map[string]string{
				"Type":             "notify",
				"NotifyAccess":     "main",
				"ExecReload":       "/bin/kill -HUP $MAINPID",
				"KillMode":         "mixed",
				"KillSignal":       "SIGTERM",
				"Restart":          "on-failure",
				"RuntimeDirectory": "qd",
				"StateDirectory":   "qd",
				"Delegate":         "yes",
			} {
				if got := u.get(s, key); got != want {
					t.Errorf("%s: %s=%q, want %q", name, key, got, want)
				}
			}
			for _, key := range []string{"WatchdogSec", "LimitNOFILE", "TimeoutStopSec"} {
				if u.get(s, key) == "" {
					t.Errorf("%s: %s is missing", name, key)
				}
			}
		}
		for key, want := range map[string]string{"User": "qd", "Group": "qd", "RuntimeDirectoryMode": "0750",
			"ExecStart": DefaultQD + " run --config " + DefaultConfig} {
			if got := system.get(s, key); got != want {
				t.Errorf("system: %s=%q, want %q", key, got, want)
			}
		}
		if got := system.get("Install", "WantedBy"); got != "multi-user.target" {
			t.Errorf("system: WantedBy=%q", got)
		}
		if got := user.get("Install", "WantedBy"); got != "default.target" {
			t.Errorf("user: WantedBy=%q", got)
		}
	})
	t.Run("StopOutlastsGrace", func(t *testing.T) {
		// Ensure systemd waits longer than qd's default drain before
		// SIGKILL, with margin to release the leases and stop the
		// private cluster.
		stop := systemdSeconds(t, system.get(s, "TimeoutStopSec"))
		if least := config.DefaultShutdownGrace + 10*time.Second; stop < least {
			t.Fatalf("TimeoutStopSec=%v, want at least %v (shutdown_grace %v + 10s)", stop, least, config.DefaultShutdownGrace)
		}
	})
	t.Run("WatchdogAllowsPings", func(t *testing.T) {
		// Ensure the watchdog interval leaves room for a ping every half
		// interval from a loop that also waits on the database.
		if w := systemdSeconds(t, system.get(s, "WatchdogSec")); w < 10*time.Second {
			t.Fatalf("WatchdogSec=%v, want at least 10s", w)
		}
	})
	t.Run("NothingBreaksAgents", func(t *testing.T) {
		// Ensure the sandbox leaves agents what they commonly need: the
		// cgroups qd makes for them, devices (GPUs, /dev/kvm, FUSE),
		// namespaces (browsers' sandboxes, bubblewrap, containers), JIT
		// memory, the process list, the network, a writable / where the
		// user may write, debuggers and nice.
		for _, key := range []string{
			"ProtectControlGroups", "ProtectClock", "PrivateDevices", "DevicePolicy", "DeviceAllow",
			"RestrictNamespaces", "MemoryDenyWriteExecute", "LockPersonality", "ProtectProc", "ProcSubset",
			"PrivateUsers", "PrivateNetwork", "IPAddressDeny", "RemoveIPC", "UMask", "DynamicUser",
		} {
			if v := system.get(s, key); v != "" && v != "no" && v != "false" {
				t.Errorf("%s=%s is set; agents inherit it", key, v)
			}
		}
		if v := system.get(s, "ProtectSystem"); v != "full" {
			t.Errorf("ProtectSystem=%s, want full: strict makes agents' workspaces read-only", v)
		}
		filter := strings.Fields(strings.TrimPrefix(system.get(s, "SystemCallFilter"), "~"))
		if !strings.HasPrefix(system.get(s, "SystemCallFilter"), "~") {
			t.Errorf("SystemCallFilter=%s is an allow list; agents run any program", system.get(s, "SystemCallFilter"))
		}
		for _, kept := range []string{"@debug", "@mount", "@privileged", "@resources", "@system-service"} {
			if slices.Contains(filter, kept) {
				t.Errorf("SystemCallFilter denies %s", kept)
			}
		}
		if v := system.get(s, "SystemCallErrorNumber"); v != "EPERM" {
			t.Errorf("SystemCallErrorNumber=%s, want EPERM: a refused call must not kill the agent", v)
		}
		families := strings.Fields(system.get(s, "RestrictAddressFamilies"))
		for _, f := range []string{"AF_UNIX", "AF_INET", "AF_INET6", "AF_NETLINK"} {
			if !slices.Contains(families, f) {
				t.Errorf("RestrictAddressFamilies lacks %s", f)
			}
		}
		// Agents run as you under the user service: nothing restricts them.
		for key := range user[s] {
			if strings.HasPrefix(key, "Protect") || strings.HasPrefix(key, "Restrict") || strings.HasPrefix(key, "Private") ||
				strings.HasPrefix(key, "SystemCall") || key == "NoNewPrivileges" || key == "CapabilityBoundingSet" {
				t.Errorf("the user service sets %s", key)
			}
		}
	})
}

// plistValue decodes the plist element that start opens.
func plistValue(dec *xml.Decoder, start xml.StartElement) (any, error) {
	switch start.Name.Local {
	case "dict":
		return plistDict(dec)
	case "array":
		var list []any
		for {
			el, err := nextElement(dec)
			if err != nil || el == nil {
				return list, err
			}
			v, err := plistValue(dec, *el)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
	case "true", "false":
		return start.Name.Local == "true", dec.Skip()
	}
	var text string
	if err := dec.DecodeElement(&text, &start); err != nil {
		return nil, err
	}
	switch start.Name.Local {
	case "string":
		return text, nil
	case "integer":
		return strconv.ParseInt(strings.TrimSpace(text), 10, 64)
	}
	return nil, fmt.Errorf("unsupported plist element <%s>", start.Name.Local)
}

func plistDict(dec *xml.Decoder) (map[string]any, error) {
	m := map[string]any{}
	for {
		el, err := nextElement(dec)
		if err != nil || el == nil {
			return m, err
		}
		var key string
		if el.Name.Local != "key" {
			return nil, fmt.Errorf("dict: want <key>, got <%s>", el.Name.Local)
		}
		if err := dec.DecodeElement(&key, el); err != nil {
			return nil, err
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("dict: duplicate key %q", key)
		}
		vel, err := nextElement(dec)
		if err != nil || vel == nil {
			return nil, fmt.Errorf("dict: key %q has no value", key)
		}
		if m[key], err = plistValue(dec, *vel); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
	}
}

// nextElement returns the next child start element, or nil at the end of
// the enclosing element.
func nextElement(dec *xml.Decoder) (*xml.StartElement, error) {
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			return &t, nil
		case xml.EndElement:
			return nil, nil
		}
	}
}

func MustParsePlist(tb testing.TB, path string, b []byte) map[string]any {
	tb.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	root, err := nextElement(dec)
	if err != nil || root == nil || root.Name.Local != "plist" {
		tb.Fatalf("%s: no <plist> root: %v", path, err)
	}
	top, err := nextElement(dec)
	if err != nil || top == nil || top.Name.Local != "dict" {
		tb.Fatalf("%s: no top-level <dict>: %v", path, err)
	}
	m, err := plistDict(dec)
	if err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	// Everything after the top-level dict must still be well-formed.
	for {
		if _, err := dec.Token(); err == io.EOF {
			break
		} else if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
	}
	return m
}

func TestPlist(t *testing.T) {
	p := MustParsePlist(t, plistPath, []byte(PlistFile))

	t.Run("Required", func(t *testing.T) {
		// Ensure launchd starts qd in the foreground at load, restarts it
		// only after a failure, and logs somewhere.
		if got := p["Label"]; got != "com.qd" {
			t.Errorf("Label = %v, want com.qd (the file name)", got)
		}
		args, _ := p["ProgramArguments"].([]any)
		if len(args) < 2 || !strings.HasPrefix(fmt.Sprint(args[0]), "/") || args[1] != "run" {
			t.Errorf("ProgramArguments = %v, want an absolute qd path then run", args)
		}
		if p["RunAtLoad"] != true {
			t.Errorf("RunAtLoad = %v, want true", p["RunAtLoad"])
		}
		keep, _ := p["KeepAlive"].(map[string]any)
		if v, ok := keep["SuccessfulExit"]; !ok || v != false {
			t.Errorf("KeepAlive = %v, want {SuccessfulExit: false}", p["KeepAlive"])
		}
		for _, key := range []string{"StandardOutPath", "StandardErrorPath"} {
			if v, _ := p[key].(string); !strings.HasPrefix(v, "/") {
				t.Errorf("%s = %v, want an absolute path", key, p[key])
			}
		}
	})
	t.Run("ExitTimeOutOutlastsGrace", func(t *testing.T) {
		// Ensure launchd waits longer than qd's default drain before
		// SIGKILL.
		got, _ := p["ExitTimeOut"].(int64)
		if least := int64((config.DefaultShutdownGrace + 10*time.Second) / time.Second); got < least {
			t.Fatalf("ExitTimeOut = %v, want at least %d", p["ExitTimeOut"], least)
		}
	})
	t.Run("PathHasHomebrew", func(t *testing.T) {
		// Ensure agents installed with Homebrew are found.
		env, _ := p["EnvironmentVariables"].(map[string]any)
		path, _ := env["PATH"].(string)
		dirs := strings.Split(path, ":")
		for _, want := range []string{"/opt/homebrew/bin", "/usr/local/bin", "/usr/bin", "/bin"} {
			if !slices.Contains(dirs, want) {
				t.Errorf("PATH %q lacks %s", path, want)
			}
		}
	})
	t.Run("Plutil", func(t *testing.T) {
		// Ensure macOS's own checker accepts the file, where it exists.
		plutil, err := exec.LookPath("plutil")
		if err != nil {
			t.Skip("plutil not installed (not macOS)")
		}
		if out, err := exec.Command(plutil, "-lint", plistPath).CombinedOutput(); err != nil {
			t.Fatalf("plutil -lint: %v\n%s", err, out)
		}
	})
}

func TestPlist_Render(t *testing.T) {
	t.Run("AgentIsTheFile", func(t *testing.T) {
		// Ensure a LaunchAgent with the shipped paths is the shipped file.
		if got := Plist(PlistParams{QD: DefaultQD, Config: DefaultPlistConfig, Log: DefaultLog}); got != PlistFile {
			t.Errorf("the LaunchAgent differs from com.qd.plist:\n%s", got)
		}
	})
	t.Run("Daemon", func(t *testing.T) {
		// Ensure a LaunchDaemon names its user, and paths that XML would
		// read otherwise arrive as they are.
		got := Plist(PlistParams{Daemon: true, UserName: "alice", QD: "/opt/q&d/qd", Config: "/etc/<qd>.hcl", Log: "/var/log/qd.log"})
		p := MustParsePlist(t, "daemon", []byte(got))
		if p["UserName"] != "alice" {
			t.Errorf("UserName = %v", p["UserName"])
		}
		args, _ := p["ProgramArguments"].([]any)
		if want := []any{"/opt/q&d/qd", "run", "--config", "/etc/<qd>.hcl"}; fmt.Sprint(args) != fmt.Sprint(want) {
			t.Errorf("ProgramArguments = %v, want %v", args, want)
		}
		if p["StandardOutPath"] != "/var/log/qd.log" || p["StandardErrorPath"] != "/var/log/qd.log" {
			t.Errorf("logs go to %v and %v", p["StandardOutPath"], p["StandardErrorPath"])
		}
	})
}

// dropIns returns the drop-ins docs/service.md shows, by file name: the
// ini blocks whose first line names a file of qd.service.d.
func dropIns(tb testing.TB) map[string]string {
	tb.Helper()
	doc, err := os.ReadFile("../docs/service.md")
	if err != nil {
		tb.Fatal(err)
	}
	found := map[string]string{}
	re := regexp.MustCompile("(?s)```ini\n# /etc/systemd/system/qd\\.service\\.d/([a-z]+\\.conf)\n(.*?)```")
	for _, m := range re.FindAllSubmatch(doc, -1) {
		found[string(m[1])] = string(m[2])
	}
	return found
}

// nnpImplied are the settings that, for a service with User=, imply
// NoNewPrivileges=yes (systemd.exec(5), NoNewPrivileges=).
var nnpImplied = []string{"SystemCallFilter", "SystemCallArchitectures", "RestrictAddressFamilies", "RestrictNamespaces",
	"PrivateDevices", "ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectClock",
	"ProtectHostname", "MemoryDenyWriteExecute", "RestrictRealtime", "RestrictSUIDSGID", "LockPersonality",
	"SystemCallLog", "DynamicUser"}

func TestUnit_DocumentedDropIns(t *testing.T) {
	// Ensure the drop-ins docs/service.md shows do what it says: systemd
	// accepts both with the unit; privileged.conf turns off every setting
	// of the unit that implies NoNewPrivileges=yes and the bounding set,
	// so agents may gain privilege again; strict.conf lowers the score;
	// and each score the page gives is the one this systemd gives.
	found := dropIns(t)
	base := exposure(t, MustWriteUnit(t, t.TempDir(), UnitParams{Config: DefaultConfig}))
	doc, _ := os.ReadFile("../docs/service.md")
	system := MustParseUnit(t, "system", UnitFile)
	for _, name := range []string{"privileged.conf", "strict.conf"} {
		text, ok := found[name]
		if !ok {
			t.Errorf("docs/service.md shows no %s", name)
			continue
		}
		dir := t.TempDir()
		path := MustWriteUnit(t, dir, UnitParams{Config: DefaultConfig})
		os.MkdirAll(filepath.Join(dir, "qd.service.d"), 0o755)
		if err := os.WriteFile(filepath.Join(dir, "qd.service.d", name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		if out := verify(t, path, false); out != "" {
			t.Errorf("systemd-analyze verify with %s:\n%s", name, out)
		}
		got := exposure(t, path)
		t.Logf("with %s: %.1f", name, got)
		if !bytes.Contains(doc, []byte(fmt.Sprintf("(score %.1f)", got))) && !bytes.Contains(doc, []byte(fmt.Sprintf("goes back to %.1f", got))) {
			scoreNotStated(t, fmt.Sprintf("docs/service.md does not give the score with %s, %.1f", name, got))
		}
		drop := MustParseUnit(t, name, text)
		switch name {
		case "privileged.conf":
			for _, key := range append(nnpImplied, "NoNewPrivileges", "CapabilityBoundingSet") {
				if _, set := system["Service"][key]; !set {
					continue
				}
				if v := drop.get("Service", key); v != "" && v != "no" && v != "~" {
					t.Errorf("privileged.conf sets %s=%s", key, v)
				} else if _, ok := drop["Service"][key]; !ok {
					t.Errorf("privileged.conf leaves %s=%s of the unit, which keeps agents from gaining privilege", key, system.get("Service", key))
				}
			}
		case "strict.conf":
			if got >= base {
				t.Errorf("strict.conf scores %.1f, the unit alone %.1f", got, base)
			}
		}
	}
}
