package localpg

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// MustFakeInstall lays out fake server binaries in root/dir that print
// version when asked; with partial, initdb is left out, as in a client-only
// package.
func MustFakeInstall(tb testing.TB, root, dir, version string, partial bool) string {
	tb.Helper()
	bin := filepath.Join(root, dir)
	if err := os.MkdirAll(bin, 0o755); err != nil {
		tb.Fatal(err)
	}
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		if partial && name == "initdb" {
			continue
		}
		script := "#!/bin/sh\necho \"" + name + " (PostgreSQL) " + version + "\"\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			tb.Fatal(err)
		}
	}
	return bin
}

// Ensure the binaries are looked for in the documented order:
// QD_PG_BINDIR alone when set, then PATH (through symlinks), then the
// fixed places with the highest version first, skipping incomplete ones,
// and that an existing cluster's version wins over a higher one.
func TestSearch_Find(t *testing.T) {
	root := t.TempDir()
	v13 := MustFakeInstall(t, root, "usr/lib/postgresql/13/bin", "13.9", false)
	v15 := MustFakeInstall(t, root, "usr/lib/postgresql/15/bin", "15.2", false)
	MustFakeInstall(t, root, "usr/lib/postgresql/16/bin", "16.1", true)
	brew := MustFakeInstall(t, root, "opt/homebrew/opt/postgresql@17/bin", "17.2", false)
	cellar := MustFakeInstall(t, root, "cellar/pg/bin", "17.4", false)
	onPath := filepath.Join(root, "path")
	os.MkdirAll(onPath, 0o755)
	if err := os.Symlink(filepath.Join(cellar, "initdb"), filepath.Join(onPath, "initdb")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		env  []string
		want string
		has  string // the version an existing cluster asks for
		err  string
	}{
		{"fixed places, highest complete version", nil, v15, "", ""},
		{"PATH first, through its symlink", []string{"PATH", onPath}, cellar, "", ""},
		{"QD_PG_BINDIR first", []string{"PATH", onPath, "QD_PG_BINDIR", v13}, v13, "", ""},
		{"QD_PG_BINDIR incomplete is an error", []string{"QD_PG_BINDIR", root}, "", "", "QD_PG_BINDIR=" + root},
		{"the existing cluster's version", []string{"PATH", onPath}, v13, "13", ""},
		{"no binaries of the cluster's version", nil, "", "12", "made by PostgreSQL 12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := search{getenv: fakeEnv(tt.env...), root: root, goos: "linux"}
			b, err := s.find(tt.has)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("find = %v, %v; want an error with %q", b, err, tt.err)
				}
				return
			}
			if err != nil || b.dir != tt.want {
				t.Fatalf("find = %q, %v; want %q", b.dir, err, tt.want)
			}
		})
	}
	if got := byVersion(filepath.Join(root, places[1])); !slices.Equal(got, []string{brew}) {
		t.Errorf("Homebrew: %v", got)
	}
}

// Ensure a machine with no binaries is told what to install, by platform.
func TestSearch_NotInstalled(t *testing.T) {
	debian := t.TempDir()
	MustFakeInstall(t, debian, "usr/bin", "", true) // pg_ctl alone, not a server
	os.WriteFile(filepath.Join(debian, "usr/bin/apt-get"), []byte("#!/bin/sh\n"), 0o755)
	tests := []struct {
		root, goos, want string
	}{
		{debian, "linux", "apt-get install postgresql"},
		{t.TempDir(), "darwin", "brew install postgresql@17"},
		{t.TempDir(), "linux", "install the PostgreSQL server package"},
	}
	for _, tt := range tests {
		s := search{getenv: fakeEnv("PATH", filepath.Join(tt.root, "usr/bin")), root: tt.root, goos: tt.goos}
		_, err := s.find("")
		if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: find = %v; want ErrNotInstalled saying %q", tt.goos, err, tt.want)
		}
	}
}

// Ensure versions sort and shorten the way PG_VERSION names them.
func TestMajor(t *testing.T) {
	for in, want := range map[string]string{"15.20": "15", "17": "17", "9.6.24": "9.6", "18beta1": "18"} {
		if got := major(in); got != want {
			t.Errorf("major(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string][]int{"15/bin": {15}, "17.2/bin": {17, 2}, "latest/bin": nil} {
		if got := leadingVersion(in); !slices.Equal(got, want) {
			t.Errorf("leadingVersion(%q) = %v, want %v", in, got, want)
		}
	}
}

// Ensure the URL escapes what libpq would misread and keeps slashes.
func TestURLFor(t *testing.T) {
	got := urlFor("/tmp/a b&c", 5432, "qd")
	want := "postgres:///qd?host=/tmp/a%20b%26c&port=5432&user=qd&sslmode=disable"
	if got != want {
		t.Errorf("urlFor = %q, want %q", got, want)
	}
}
