package daemon_test

import (
	"bufio"
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/config"
)

const unitPath = "../systemd/qd.service"
const plistPath = "../systemd/com.qd.plist"

// unit is a parsed systemd unit file: section → key → values in order.
type unit map[string]map[string][]string

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func MustParseUnit(tb testing.TB, path string) unit {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
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

func TestUnit_Verify(t *testing.T) {
	// Ensure systemd itself accepts every line of the unit: verify prints
	// unknown keys and bad values as warnings, so any output fails.
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	// verify checks that ExecStart's program exists; point it at one that does.
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(t.TempDir(), "qd.service")
	if err := os.WriteFile(tmp, bytes.ReplaceAll(b, []byte("/usr/local/bin/qd "), []byte(exe+" ")), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", tmp).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestUnit_Directives(t *testing.T) {
	u := MustParseUnit(t, unitPath)
	s := "Service"

	t.Run("Required", func(t *testing.T) {
		// Ensure the directives qd's lifecycle depends on are there.
		for key, want := range map[string]string{
			"Type":                 "notify",
			"NotifyAccess":         "main",
			"ExecStart":            "/usr/local/bin/qd run --config /etc/qd/qd.hcl",
			"ExecReload":           "/bin/kill -HUP $MAINPID",
			"KillMode":             "mixed",
			"KillSignal":           "SIGTERM",
			"Restart":              "on-failure",
			"User":                 "qd",
			"Group":                "qd",
			"RuntimeDirectory":     "qd",
			"RuntimeDirectoryMode": "0750",
			"StateDirectory":       "qd",
			"Delegate":             "yes",
		} {
			if got := u.get(s, key); got != want {
				t.Errorf("%s=%q, want %q", key, got, want)
			}
		}
		for _, key := range []string{"WatchdogSec", "LimitNOFILE"} {
			if u.get(s, key) == "" {
				t.Errorf("%s is missing", key)
			}
		}
		// Read-only cgroups would keep qd out of its delegated subtree.
		if got := u.get(s, "ProtectControlGroups"); got != "" && got != "no" {
			t.Errorf("ProtectControlGroups=%s: qd could not create its runs' cgroups", got)
		}
		if got := u.get("Install", "WantedBy"); got != "multi-user.target" {
			t.Errorf("WantedBy=%q", got)
		}
	})
	t.Run("StopOutlastsGrace", func(t *testing.T) {
		// Ensure systemd waits longer than qd's default drain before
		// SIGKILL, with margin to release the leases.
		stop := systemdSeconds(t, u.get(s, "TimeoutStopSec"))
		if least := config.DefaultShutdownGrace + 10*time.Second; stop < least {
			t.Fatalf("TimeoutStopSec=%v, want at least %v (shutdown_grace %v + 10s)", stop, least, config.DefaultShutdownGrace)
		}
	})
	t.Run("WatchdogAllowsPings", func(t *testing.T) {
		// Ensure the watchdog interval leaves room for a ping every half
		// interval from a loop that also waits on the database.
		if w := systemdSeconds(t, u.get(s, "WatchdogSec")); w < 10*time.Second {
			t.Fatalf("WatchdogSec=%v, want at least 10s", w)
		}
	})
	t.Run("NothingBreaksAgents", func(t *testing.T) {
		// Ensure no active directive takes from agents what they commonly
		// need: privilege (NoNewPrivileges, or the settings that imply it
		// under User=), writable / and home, a shared /tmp, JIT memory.
		for _, key := range []string{
			"NoNewPrivileges", "MemoryDenyWriteExecute", "ProtectSystem", "ProtectHome", "PrivateTmp",
			"ProtectKernelTunables", "ProtectKernelModules", "ProtectKernelLogs", "ProtectClock",
			"ProtectHostname", "LockPersonality", "RestrictRealtime", "RestrictSUIDSGID",
			"RestrictNamespaces", "RestrictAddressFamilies", "SystemCallFilter",
			"SystemCallArchitectures", "PrivateDevices", "DynamicUser",
		} {
			if v := u.get(s, key); v != "" && v != "no" && v != "false" {
				t.Errorf("%s=%s is set; agents inherit it", key, v)
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

func MustParsePlist(tb testing.TB, path string) map[string]any {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
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
	p := MustParsePlist(t, plistPath)

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
