package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestSearchPaths(t *testing.T) {
	// Ensure the documented order: $QD_CONFIG, ./qd.hcl, the XDG config
	// directory, /etc/qd.
	t.Setenv("QD_CONFIG", "/opt/qd.hcl")
	t.Setenv("XDG_CONFIG_HOME", "/home/u/.cfg")
	want := []string{"/opt/qd.hcl", "qd.hcl", "/home/u/.cfg/qd/qd.hcl", "/etc/qd/qd.hcl"}
	if got := SearchPaths(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	t.Setenv("QD_CONFIG", "")
	t.Setenv("XDG_CONFIG_HOME", "")
	t.Setenv("HOME", "/home/u")
	want = []string{"qd.hcl", "/home/u/.config/qd/qd.hcl", "/etc/qd/qd.hcl"}
	if got := SearchPaths(); !reflect.DeepEqual(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestFind(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("QD_CONFIG", filepath.Join(dir, "missing.hcl"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "xdg"))

	t.Run("OK", func(t *testing.T) {
		// Ensure the first file that exists wins over later ones.
		MustWrite(t, filepath.Join(dir, "xdg", "qd", "qd.hcl"), "", 0o644)
		MustWrite(t, filepath.Join(dir, "qd.hcl"), "", 0o644)
		defer os.Remove(filepath.Join(dir, "qd.hcl"))
		path, tried, err := Find()
		if err != nil || path != "qd.hcl" || len(tried) != 2 {
			t.Fatalf("got %q, tried %q, %v; want qd.hcl after 2 tries", path, tried, err)
		}
	})
	t.Run("ErrNotExist", func(t *testing.T) {
		// Ensure a search that finds nothing says so and lists where it
		// looked.
		if _, err := os.Stat("/etc/qd/qd.hcl"); err == nil {
			t.Skip("/etc/qd/qd.hcl exists on this machine")
		}
		os.RemoveAll(filepath.Join(dir, "xdg"))
		_, tried, err := Find()
		if !errors.Is(err, fs.ErrNotExist) || len(tried) != 4 {
			t.Fatalf("got %v after %q, want fs.ErrNotExist after 4 tries", err, tried)
		}
	})
}
