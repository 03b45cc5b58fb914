package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// Ensure the daemon binary is --qd when given, else the qd next to
// qdbench, else the first qd in PATH, and that none is bad usage.
func TestFindQD(t *testing.T) {
	beside, inPath, empty := t.TempDir(), t.TempDir(), t.TempDir()
	besideQD := MustProgram(t, beside, "qd")
	pathQD := MustProgram(t, inPath, "qd")
	other := MustProgram(t, empty, "other-qd")
	exe := filepath.Join(beside, "qdbench")
	alone := filepath.Join(empty, "qdbench")
	tests := []struct {
		name, given, exe, path, want, err string
	}{
		{name: "Flag", given: other, exe: exe, path: inPath, want: other},
		{name: "FlagFromPATH", given: "other-qd", exe: exe, path: empty, want: other},
		{name: "Beside", exe: exe, path: inPath, want: besideQD},
		{name: "PATH", exe: alone, path: inPath, want: pathQD},
		{name: "NoExecutable", path: inPath, want: pathQD},
		{name: "None", exe: alone, path: empty, err: "no qd binary next to " + alone + " or in PATH to run as the daemon; name one with --qd BINARY"},
		{name: "NoneNoExecutable", path: empty, err: "no qd binary in PATH"},
		{name: "FlagMissing", given: filepath.Join(empty, "qd"), exe: exe, path: inPath, err: "--qd " + filepath.Join(empty, "qd") + ": stat "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			got, err := findQD(tt.given, tt.exe)
			switch {
			case tt.err != "" && (exitCode(err) != ExitUsage || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("findQD(%q, %q) = %q, %v; want usage error %q", tt.given, tt.exe, got, err, tt.err)
			case tt.err == "" && (err != nil || got != tt.want):
				t.Errorf("findQD(%q, %q) = %q, %v; want %q", tt.given, tt.exe, got, err, tt.want)
			}
		})
	}
}
