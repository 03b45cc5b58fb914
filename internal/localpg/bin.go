package localpg

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
)

// ErrNotInstalled is returned, wrapped in a message that says what to
// install, when no directory holds initdb, pg_ctl and postgres.
var ErrNotInstalled = errors.New("no PostgreSQL server binaries found")

// binaries is a directory holding initdb, pg_ctl and postgres.
type binaries struct {
	dir string
}

func (b binaries) path(name string) string { return filepath.Join(b.dir, name) }

// version is the server's version as postgres --version prints it, "15.20".
func (b binaries) version() (string, error) {
	out, err := exec.Command(b.path("postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", b.path("postgres"), err)
	}
	// "postgres (PostgreSQL) 15.20 (Debian 15.20-0+deb12u1)"
	_, rest, ok := strings.Cut(string(out), ") ")
	f := strings.Fields(rest)
	if !ok || len(f) == 0 {
		return "", fmt.Errorf("%s --version: unexpected output %q", b.path("postgres"), out)
	}
	return f[0], nil
}

// major is the part of a version a data directory's PG_VERSION names:
// "15" for 15.20 or 15beta1, "9.6" for 9.6.24.
func major(version string) string {
	v := leadingVersion(version)
	switch {
	case len(v) == 0:
		return version
	case v[0] < 10 && len(v) > 1:
		return strconv.Itoa(v[0]) + "." + strconv.Itoa(v[1])
	}
	return strconv.Itoa(v[0])
}

// search says where to look for the binaries. root is "/" except in tests,
// which lay out fake installations under a directory of their own.
type search struct {
	getenv func(string) string
	root   string
	goos   string
}

func defaultSearch(getenv func(string) string) search {
	return search{getenv: getenv, root: "/", goos: runtime.GOOS}
}

// places are the fixed installation directories, each a glob whose
// matches are tried highest version first: Debian's, Homebrew's (Apple
// silicon, then Intel), Postgres.app's.
var places = []string{
	"usr/lib/postgresql/*/bin",
	"opt/homebrew/opt/postgresql@*/bin",
	"usr/local/opt/postgresql@*/bin",
	"Applications/Postgres.app/Contents/Versions/*/bin",
}

// find returns the first directory with the server binaries, in the order
// $QD_PG_BINDIR, $PATH, pg_config --bindir, places. With want set (the
// PG_VERSION of an existing cluster) it returns the first of that major
// version. $QD_PG_BINDIR, when set, is the only place tried.
func (s search) find(want string) (binaries, error) {
	if dir := s.getenv("QD_PG_BINDIR"); dir != "" {
		b := binaries{dir}
		if !complete(dir) {
			return binaries{}, fmt.Errorf("QD_PG_BINDIR=%s: no initdb, pg_ctl and postgres there", dir)
		}
		return b, s.check(b, want)
	}
	var seen []binaries
	for _, dir := range s.candidates() {
		b := binaries{dir}
		if slices.Contains(seen, b) || !complete(dir) {
			continue
		}
		seen = append(seen, b)
		if s.check(b, want) == nil {
			return b, nil
		}
	}
	if len(seen) > 0 {
		return binaries{}, fmt.Errorf("the private cluster was made by PostgreSQL %s, and the server binaries found (%s) are another version: install PostgreSQL %s's server, or set QD_PG_BINDIR to its bin directory",
			want, strings.Join(dirs(seen), ", "), want)
	}
	return binaries{}, s.notInstalled()
}

// check refuses b when want is set and b's major version differs.
func (s search) check(b binaries, want string) error {
	if want == "" {
		return nil
	}
	v, err := b.version()
	if err != nil {
		return err
	}
	if major(v) != want {
		return fmt.Errorf("the private cluster was made by PostgreSQL %s, and %s holds PostgreSQL %s", want, b.dir, v)
	}
	return nil
}

// candidates lists the directories to try, in order, before checking them.
func (s search) candidates() []string {
	var out []string
	for _, dir := range filepath.SplitList(s.getenv("PATH")) {
		if dir == "" {
			continue
		}
		if real, err := filepath.EvalSymlinks(filepath.Join(dir, "initdb")); err == nil {
			out = append(out, filepath.Dir(real))
		}
	}
	if dir := s.pgConfig(); dir != "" {
		out = append(out, dir)
	}
	for _, glob := range places {
		out = append(out, byVersion(filepath.Join(s.root, glob))...)
	}
	return out
}

// pgConfig asks the pg_config found in $PATH for its bin directory.
func (s search) pgConfig() string {
	for _, dir := range filepath.SplitList(s.getenv("PATH")) {
		p := filepath.Join(dir, "pg_config")
		if dir == "" || !executable(p) {
			continue
		}
		out, err := exec.Command(p, "--bindir").Output()
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(out))
	}
	return ""
}

// byVersion returns the matches of glob, highest version first; the
// version is the first run of digits and dots in the part the * matched.
func byVersion(glob string) []string {
	matches, _ := filepath.Glob(glob)
	star := strings.Index(glob, "*")
	type versioned struct {
		dir string
		v   []int
	}
	var vs []versioned
	for _, m := range matches {
		if v := leadingVersion(m[star:]); v != nil {
			vs = append(vs, versioned{m, v})
		}
	}
	slices.SortStableFunc(vs, func(a, b versioned) int { return slices.Compare(b.v, a.v) })
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = v.dir
	}
	return out
}

// leadingVersion parses "15/bin" or "17.2/bin" into [15] or [17 2]; nil
// when s does not start with a digit ("latest/bin").
func leadingVersion(s string) []int {
	end := strings.IndexFunc(s, func(r rune) bool { return r != '.' && (r < '0' || r > '9') })
	if end < 0 {
		end = len(s)
	}
	var v []int
	for _, p := range strings.Split(s[:end], ".") {
		n, err := strconv.Atoi(p)
		if err != nil {
			break
		}
		v = append(v, n)
	}
	return v
}

func complete(dir string) bool {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if !executable(filepath.Join(dir, name)) {
			return false
		}
	}
	return true
}

func executable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

func dirs(bs []binaries) []string {
	out := make([]string, len(bs))
	for i, b := range bs {
		out[i] = b.dir
	}
	return out
}

// notInstalled says what was searched and what to install on this
// platform.
func (s search) notInstalled() error {
	return fmt.Errorf("%w (looked in $QD_PG_BINDIR, $PATH, pg_config --bindir, /%s): %s, or set QD_PG_BINDIR to the directory holding initdb and pg_ctl, or set QD_DATABASE_URL to a PostgreSQL server you already have",
		ErrNotInstalled, strings.Join(places, ", /"), s.installHint())
}

// installHint names the package to install, by the platform's package
// manager.
func (s search) installHint() string {
	if s.goos == "darwin" {
		return "install them with `brew install postgresql@17` (or Postgres.app)"
	}
	for _, pm := range []struct{ tool, hint string }{
		{"apt-get", "apt-get install postgresql"},
		{"dnf", "dnf install postgresql-server"},
		{"yum", "yum install postgresql-server"},
		{"apk", "apk add postgresql"},
		{"pacman", "pacman -S postgresql"},
	} {
		for _, dir := range []string{"usr/bin", "usr/sbin", "bin", "sbin"} {
			if executable(filepath.Join(s.root, dir, pm.tool)) {
				return "install them with `" + pm.hint + "`"
			}
		}
	}
	return "install the PostgreSQL server package of this system"
}
