package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// MustEnv returns an Env with an empty environment and output buffers,
// whose executable sits in a fresh directory beside a qd program.
func MustEnv(tb testing.TB) (*Env, *bytes.Buffer, *bytes.Buffer) {
	tb.Helper()
	dir := tb.TempDir()
	MustProgram(tb, dir, "qd")
	var out, errb bytes.Buffer
	env := &Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" },
		Executable: filepath.Join(dir, "qdbench")}
	return env, &out, &errb
}

// MustProgram writes an executable file named name into dir; qdbench only
// looks for it, and the tests that use it never start it.
func MustProgram(tb testing.TB, dir, name string) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		tb.Fatal(err)
	}
	return path
}

// Ensure bad usage exits 2 with one message naming the flag or argument at
// fault, before the bench writes anything.
func TestRun_Usage(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--colour", "red"}, "flag provided but not defined: --colour"},
		{[]string{"--size", "huge"}, `--size "huge": want small or full`},
		{[]string{"--size"}, "flag needs an argument: --size"},
		{[]string{"--duration", "0"}, `invalid value "0" for flag --duration: must be a positive duration`},
		{[]string{"--duration", "-1s"}, `invalid value "-1s" for flag --duration: must be a positive duration`},
		{[]string{"--duration", "soon"}, `invalid value "soon" for flag --duration: not a duration`},
		{[]string{"--json", "extra"}, `unexpected argument "extra"`},
		{[]string{"--only", "e2e,warp"}, `--only "warp": want parts among claims, heartbeats, depth, history, soak, e2e, idle`},
		{[]string{"--qd", "/nonexistent/qd"}, "--qd /nonexistent/qd: stat /nonexistent/qd: no such file or directory"},
	}
	for _, tt := range tests {
		env, out, errb := MustEnv(t)
		err := Run(context.Background(), tt.args, env)
		if got := exitCode(err); got != ExitUsage || err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("qdbench %s: exit %d, %v; want exit 2 and %q", strings.Join(tt.args, " "), got, err, tt.want)
		}
		if out.Len() > 0 || errb.Len() > 0 {
			t.Errorf("qdbench %s wrote %q %q, want nothing", strings.Join(tt.args, " "), out, errb)
		}
	}
}

// Ensure --help prints the usage and every flag to stdout and exits 0.
func TestRun_Help(t *testing.T) {
	env, out, _ := MustEnv(t)
	if err := Run(context.Background(), []string{"--help"}, env); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Usage: " + usage, "--db URL", "--size SIZE", "(default small)", "--duration DURATION", "--out FILE", "--json", "--qd BINARY", "--river DIR", "--only PARTS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out)
		}
	}
}

// Ensure qdbench refuses to start without a qd to run as the daemon, and
// says which flag names one.
func TestRun_NoQD(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	env, out, _ := MustEnv(t)
	env.Executable = filepath.Join(t.TempDir(), "qdbench")
	err := Run(context.Background(), nil, env)
	if exitCode(err) != ExitUsage || err == nil || !strings.Contains(err.Error(), "no qd binary next to "+env.Executable+" or in PATH") || !strings.Contains(err.Error(), "--qd BINARY") {
		t.Errorf("got exit %d, %v; want exit 2 naming --qd", exitCode(err), err)
	}
	if out.Len() > 0 {
		t.Errorf("stdout = %q, want nothing", out)
	}
}

// Ensure a bench that fails exits 1 and still prints what it measured (here
// nothing but the header: the database refuses connections).
func TestRun_Failure(t *testing.T) {
	env, out, _ := MustEnv(t)
	err := Run(context.Background(), []string{"--db", "postgres://qd@127.0.0.1:1/qd?connect_timeout=5"}, env)
	if exitCode(err) != ExitFailure || err == nil || !strings.Contains(err.Error(), "bench environment") {
		t.Errorf("got exit %d, %v; want exit 1 from the environment step", exitCode(err), err)
	}
	if !strings.HasPrefix(out.String(), "qdbench, size small, ") {
		t.Errorf("stdout = %q, want the report's header", out)
	}
}

// Ensure qdbench without --db or QD_DATABASE_URL exits 2 before it runs
// anything, rather than measuring in some default database.
func TestRun_NoDatabase(t *testing.T) {
	env, out, _ := MustEnv(t)
	err := Run(context.Background(), nil, env)
	if exitCode(err) != ExitUsage || err == nil || !strings.Contains(err.Error(), "give --db URL or set QD_DATABASE_URL") {
		t.Errorf("got exit %d, %v; want exit 2 naming --db and QD_DATABASE_URL", exitCode(err), err)
	}
	if out.Len() > 0 {
		t.Errorf("stdout = %q, want nothing", out)
	}
}
