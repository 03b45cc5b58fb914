package config

import (
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/qd-run/qd/lease"
)

// MustLoad loads a fixture that must be valid.
func MustLoad(tb testing.TB, path string) *Config {
	tb.Helper()
	c, err := Load(path)
	if err != nil {
		tb.Fatalf("load %s:\n%v", path, err)
	}
	return c
}

// MustAbs returns the absolute form of a path relative to the package.
func MustAbs(tb testing.TB, path string) string {
	tb.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	return abs
}

func TestLoad_NotExist(t *testing.T) {
	// Ensure a missing file is reported as such, so qd run can fall back to
	// the defaults and qd run --config can say the file is missing.
	_, err := Load(filepath.Join(t.TempDir(), "qd.hcl"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("got %v, want an error wrapping fs.ErrNotExist", err)
	}
}

func TestLoad_Empty(t *testing.T) {
	// Ensure an empty file is a valid file of defaults (a client-only
	// config may hold nothing but the database).
	c := MustLoad(t, "testdata/empty/qd.hcl")
	if len(c.Agents) != 0 || c.LogLevel != DefaultLogLevel || c.ShutdownGrace != DefaultShutdownGrace {
		t.Fatalf("got %+v, want the defaults", c)
	}
}

func TestLoad_Defaults(t *testing.T) {
	// Ensure everything a file leaves out takes its documented default.
	c := MustLoad(t, "testdata/valid/qd.hcl")
	def := Default()
	if got, want := [...]any{c.Path, c.Database, c.Name, c.Socket, c.StateDir, c.LogLevel, c.LogFormat, c.ShutdownGrace, c.Retention},
		[...]any{MustAbs(t, "testdata/valid/qd.hcl"), "", def.Name, def.Socket, def.StateDir, "info", "text", 30 * time.Second, time.Duration(0)}; got != want {
		t.Fatalf("top level: got %v, want %v", got, want)
	}
	if len(c.Agents) != 1 || len(c.Periodics) != 1 {
		t.Fatalf("got %d agents and %d periodics, want 1 and 1", len(c.Agents), len(c.Periodics))
	}
	a := c.Agents[0]
	if !filepath.IsAbs(a.Command[0]) || filepath.Base(a.Command[0]) != "sh" {
		t.Errorf("command: got %q, want the absolute path of sh from $PATH", a.Command[0])
	}
	a.Command, a.Sched = nil, nil
	want := Agent{
		Name: "build", Schedule: "*/5 * * * *", Parallel: 1,
		Lease: 5 * time.Minute, Heartbeat: 100 * time.Second, KillGrace: 10 * time.Second,
		RetryBackoff: 10 * time.Second, MaxAttempts: 3, Output: OutputSeparate, MaxDeferrals: 100, DeclRange: a.DeclRange,
	}
	if !reflect.DeepEqual(a, want) {
		t.Errorf("agent:\ngot  %+v\nwant %+v", a, want)
	}
	p := c.Periodics[0]
	p.Sched = nil
	wantP := Periodic{Name: "nightly", Schedule: "@daily", Agent: "build", Lane: "default",
		Payload: "{}", CatchUp: "skip", Overlap: "skip", MaxAttempts: 3, DeclRange: p.DeclRange}
	if !reflect.DeepEqual(p, wantP) {
		t.Errorf("periodic:\ngot  %+v\nwant %+v", p, wantP)
	}
	if got := c.Agents[0].Pos(); got != "testdata/valid/qd.hcl:2" {
		t.Errorf("agent pos: got %q, want testdata/valid/qd.hcl:2", got)
	}
}

func TestLoad_Full(t *testing.T) {
	// Ensure every field set in a file arrives in the Config as written,
	// with relative paths resolved against the file (and the program
	// against the agent's dir).
	c := MustLoad(t, "testdata/full/qd.hcl")
	dir := MustAbs(t, "testdata/full")
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	from := time.Date(2025, 3, 28, 12, 0, 0, 0, time.Local)
	nexts := map[string]time.Time{
		"build":  from.Add(45 * time.Second),
		"deploy": time.Date(2025, 3, 31, 2, 30, 0, 0, paris),
		"weekly": time.Date(2025, 3, 30, 6, 0, 0, 0, time.Local),
		"hourly": time.Date(2025, 3, 28, 13, 0, 0, 0, time.Local),
	}
	lines := map[string]int{"deploy": 10, "build": 26, "weekly": 31, "hourly": 40}
	for i := range c.Agents {
		a := &c.Agents[i]
		checkSched(t, a.Name, a.Sched.Next(from), nexts[a.Name], a.DeclRange.Start.Line, lines[a.Name])
		a.Sched, a.DeclRange, a.dirLine = nil, hcl.Range{}, 0
	}
	for i := range c.Periodics {
		p := &c.Periodics[i]
		checkSched(t, p.Name, p.Sched.Next(from), nexts[p.Name], p.DeclRange.Start.Line, lines[p.Name])
		p.Sched, p.DeclRange = nil, hcl.Range{}
	}
	three, yes := 3, true
	want := &Config{
		Path:          filepath.Join(dir, "qd.hcl"),
		Database:      "postgres://qd@db.example:5432/qd?sslmode=disable",
		Name:          "builder-1",
		Socket:        filepath.Join(dir, "run/qd.sock"),
		StateDir:      filepath.Join(dir, "state"),
		LogLevel:      "debug",
		LogFormat:     "json",
		ShutdownGrace: 45 * time.Second,
		Retention:     720 * time.Hour,
		Agents: []Agent{{
			Name: "build", Command: []string{"/bin/sh", "-c", "make"}, Schedule: "@every 45s",
			Parallel: 1, Lease: 5 * time.Minute, Heartbeat: 100 * time.Second,
			KillGrace: 10 * time.Second, RetryBackoff: 10 * time.Second, MaxAttempts: 3, MaxDeferrals: 100,
			Output: OutputSeparate,
		}, {
			Name:         "deploy",
			Command:      []string{filepath.Join(dir, "bin/agent"), "--deploy", "fast"},
			Dir:          filepath.Join(dir, "work"),
			Env:          map[string]string{"STAGE": "prod", "RETRIES": "2"},
			Schedule:     "CRON_TZ=Europe/Paris 30 2 * * 1-5",
			Lanes:        []string{"prod", "staging"},
			Parallel:     4,
			Lease:        2 * time.Minute,
			Heartbeat:    20 * time.Second,
			Timeout:      90 * time.Minute,
			StallTimeout: 15 * time.Minute,
			KillGrace:    3 * time.Second,
			RetryBackoff: time.Minute, MaxDeferrals: 100,
			MaxAttempts: 7,
			Output:      OutputSeparate,
		}},
		Periodics: []Periodic{{
			Name: "hourly", Schedule: "@hourly", Agent: "build", Lane: "default",
			Payload: "{}", CatchUp: "skip", Overlap: "skip", MaxAttempts: 3,
		}, {
			Name: "weekly", Schedule: "0 6 * * 0", Agent: "deploy", Lane: "staging",
			Payload: `{"env": "staging", "n": [1, 2]}`, Priority: -3, CatchUp: "once", Overlap: "skip",
			MaxAttempts: 7, // the agent's
		}},
		Lanes: []Lane{{Name: "prod", MaxRunning: &three}, {Name: "staging", Paused: &yes}},
	}
	for i := range c.Lanes {
		c.Lanes[i].DeclRange = hcl.Range{}
	}
	c.file, c.socketLine = "", 0 // where CheckHost reports problems, checked there
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("\ngot  %+v\nwant %+v", c, want)
	}
}

func checkSched(t *testing.T, name string, got, want time.Time, gotLine, wantLine int) {
	t.Helper()
	if !got.Equal(want) {
		t.Errorf("%s: next tick: got %v, want %v", name, got, want)
	}
	if gotLine != wantLine {
		t.Errorf("%s: block at line %d, want %d", name, gotLine, wantLine)
	}
}

func TestParse_Secret(t *testing.T) {
	// Ensure the database password never appears in an error, whatever is
	// wrong with the line that holds it.
	for _, src := range []string{
		`database = ["postgres://qd:s3cretpw@db/qd"]`,
		`database = "postgres://qd:s3cretpw@db/qd`,
		"database = \"postgres://qd:s3cretpw@db/qd\"\nlog_level = \"loud\"\n",
		`database = "postgres://qd:s3cretpw@db/qd" name = "x"`,
	} {
		_, err := Parse([]byte(src), "qd.hcl")
		if err == nil {
			t.Fatalf("%s: no error", src)
		}
		if strings.Contains(err.Error(), "s3cretpw") {
			t.Errorf("%s: error shows the password: %v", src, err)
		}
	}
}

func TestParse_PayloadTooLarge(t *testing.T) {
	// Ensure a payload over the queue's cap is refused at load, not at
	// each tick.
	src := "agent \"a\" {\n  command = [\"/bin/sh\"]\n  schedule = \"@hourly\"\n}\n" +
		"periodic \"big\" {\n  schedule = \"@hourly\"\n  agent = \"a\"\n" +
		`  payload = "\"` + strings.Repeat("x", lease.MaxPayloadBytes) + `\""` + "\n}\n"
	_, err := Parse([]byte(src), "big.hcl")
	want := `big.hcl:8: periodic "big": payload is 1048578 bytes, more than the 1048576-byte limit`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}

func TestDefault_Env(t *testing.T) {
	// Ensure the default socket and state directory follow the
	// environment qd runs in, and that root's shell and root's service
	// agree on the socket.
	tmp := os.TempDir()
	for _, tt := range []struct {
		name          string
		env           map[string]string
		uid           int
		socket, state string
	}{
		{"User", map[string]string{"HOME": "/home/u"}, 1000,
			filepath.Join(tmp, "qd-1000/qd.sock"), "/home/u/.local/state/qd"},
		{"UserXDG", map[string]string{"HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1000", "XDG_STATE_HOME": "/home/u/st"}, 1000,
			"/run/user/1000/qd/qd.sock", "/home/u/st/qd"},
		{"UserService", map[string]string{"HOME": "/home/u", "INVOCATION_ID": "abc", "XDG_RUNTIME_DIR": "/run/user/1000"}, 1000,
			"/run/user/1000/qd/qd.sock", "/home/u/.local/state/qd"},
		{"SystemService", map[string]string{"INVOCATION_ID": "abc", "STATE_DIRECTORY": "/var/lib/qd:/var/lib/other"}, 990,
			"/run/qd/qd.sock", "/var/lib/qd"},
		{"Root", map[string]string{"HOME": "/root"}, 0, "/run/qd/qd.sock", "/var/lib/qd"},
		{"RootShellXDG", map[string]string{"HOME": "/root", "XDG_RUNTIME_DIR": "/run/user/0"}, 0, "/run/qd/qd.sock", "/var/lib/qd"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := defaults(func(k string) string { return tt.env[k] }, tt.uid)
			if c.Socket != tt.socket || c.StateDir != tt.state {
				t.Fatalf("got socket %s, state %s; want %s, %s", c.Socket, c.StateDir, tt.socket, tt.state)
			}
		})
	}
}

func TestDefault(t *testing.T) {
	// Ensure the file-less config names this host and has no agents.
	host, _ := os.Hostname()
	c := Default()
	if c.Name != host || c.Path != "" || len(c.Agents) != 0 || c.LogFormat != "text" || c.Socket == "" || c.StateDir == "" {
		t.Fatalf("got %+v", c)
	}
}

// Ensure a client reading a daemon's config on another host gets its
// settings even when the agents' programs and directories are not there,
// while the daemon's own load still rejects them.
func TestLoadClient_SkipsHostChecks(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "qd.hcl")
	src := `database = "postgres://qd@db/qd"
socket = "/tmp/qd-client-test.sock"
agent "build" {
  command  = ["/nonexistent/build"]
  dir      = "/nonexistent/dir"
  schedule = "@every 1m"
}
`
	if err := os.WriteFile(path, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil {
		t.Fatal("Load accepted a missing program")
	}
	c, err := LoadClient(path)
	if err != nil {
		t.Fatalf("LoadClient: %v", err)
	}
	if c.Database != "postgres://qd@db/qd" || c.Socket != "/tmp/qd-client-test.sock" {
		t.Fatalf("LoadClient gave database %q socket %q", c.Database, c.Socket)
	}
	if err := os.WriteFile(path, []byte(src+"bogus = 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadClient(path); err == nil || !strings.Contains(err.Error(), "qd.hcl:8") {
		t.Fatalf("LoadClient on an unknown setting: %v, want an error at qd.hcl:8", err)
	}
}

// Ensure the service's socket counts as a user's own only when it is a
// socket that user owns (so `sudo -u qd qd status` finds the unit's).
func TestOwnSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if !ownSocket(path, os.Getuid()) {
		t.Error("a socket of this user is not its own")
	}
	if ownSocket(path, os.Getuid()+1) {
		t.Error("a socket of another user counts as this one's")
	}
	file := filepath.Join(dir, "f")
	os.WriteFile(file, nil, 0o600)
	if ownSocket(file, os.Getuid()) || ownSocket(filepath.Join(dir, "none"), os.Getuid()) {
		t.Error("a plain file or nothing counts as a socket")
	}
}

// Ensure ~ and ~/ in a path stand for the home directory of the user
// reading the file.
func TestLoad_Tilde(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	MustWrite(t, filepath.Join(home, "bin", "agent"), "#!/bin/sh\nexit 0\n", 0o755)
	c, err := Parse([]byte("state_dir = \"~/.local/state/qd\"\nsocket = \"~/qd.sock\"\n"+
		"agent \"a\" {\n  command = [\"~/bin/agent\"]\n  schedule = \"@hourly\"\n  dir = \"~\"\n}\n"), "qd.hcl")
	if err != nil {
		t.Fatal(err)
	}
	if a := c.Agents[0]; a.Command[0] != filepath.Join(home, "bin", "agent") || a.Dir != home {
		t.Errorf("agent command %q, dir %q; want them under %s", a.Command[0], a.Dir, home)
	}
	if want := filepath.Join(home, ".local/state/qd"); c.StateDir != want {
		t.Errorf("state_dir = %q, want %q", c.StateDir, want)
	}
	if want := filepath.Join(home, "qd.sock"); c.Socket != want {
		t.Errorf("socket = %q, want %q", c.Socket, want)
	}
}

// Ensure an agent's timetable stands for a periodic schedule of its name,
// in its first lane, that the agent wakes on it when it has no schedule,
// and that a periodic block of the same name is refused at the line.
func TestLoad_Timetable(t *testing.T) {
	c, err := Parse([]byte(`agent "backup" {
  command   = ["/bin/true"]
  timetable = "0 3 * * *"
  lanes     = ["nightly", "other"]
}
`), "qd.hcl")
	if err != nil {
		t.Fatal(err)
	}
	a := c.Agent("backup")
	if a.Schedule != "0 3 * * *" || a.Sched == nil {
		t.Errorf("schedule %q, want the timetable's", a.Schedule)
	}
	p := c.Periodic("backup")
	if p == nil || p.Agent != "backup" || p.Lane != "nightly" || p.Schedule != "0 3 * * *" || p.Overlap != OverlapSkip || p.Sched == nil {
		t.Errorf("periodic of the timetable: %+v", p)
	}
	_, err = Parse([]byte(`agent "backup" {
  command   = ["/bin/true"]
  schedule  = "@every 1m"
  timetable = "0 3 * * *"
}
periodic "backup" {
  agent    = "backup"
  schedule = "@daily"
}
`), "qd.hcl")
	if err == nil || !strings.Contains(err.Error(), `qd.hcl:4: agent "backup": timetable stands for a periodic schedule named "backup", and qd.hcl:6 defines one already`) {
		t.Errorf("timetable beside a periodic of the same name: %v", err)
	}
}
