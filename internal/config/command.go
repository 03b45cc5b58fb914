package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// resolveProgram finds the program of a command the way the supervisor will
// run it: a bare name on $PATH, a relative path against base (the agent's
// dir, or the config file's directory). It returns the absolute path.
func resolveProgram(prog, base string) (string, error) {
	if strings.HasPrefix(prog, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("program %q: ~ stands for the home directory, and there is none to take (%v)", prog, err)
		}
		prog = filepath.Join(home, prog[2:])
	}
	if !strings.Contains(prog, "/") {
		path, err := exec.LookPath(prog)
		if err != nil {
			hint := ""
			if _, err := os.Stat(filepath.Join(base, prog)); err == nil {
				hint = fmt.Sprintf(" (a name without a slash is looked up in $PATH; write \"./%s\" for the file in %s)", prog, base)
			}
			return "", fmt.Errorf("program %q is not found in $PATH%s", prog, hint)
		}
		return filepath.Abs(path)
	}
	if !filepath.IsAbs(prog) {
		prog = filepath.Join(base, prog)
	}
	return filepath.Clean(prog), nil
}

// checkExecutable says what keeps path from being executed, or returns nil.
// what names the file in the message ("program", "interpreter").
func checkExecutable(what, path string) error {
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s %s does not exist", what, path)
	case err != nil:
		return fmt.Errorf("%s %s: %w", what, path, err)
	case fi.IsDir():
		return fmt.Errorf("%s %s is a directory", what, path)
	case fi.Mode().Perm()&0o111 == 0:
		return fmt.Errorf("%s %s is not executable (mode %04o)", what, path, fi.Mode().Perm())
	}
	if err := syscall.Access(path, 1); err != nil { // X_OK for this user
		return fmt.Errorf("%s %s is not executable by uid %d: %w", what, path, os.Getuid(), err)
	}
	return nil
}

// checkShebang checks the interpreter named by a script's "#!" line, which
// exec would otherwise report as a misleading "no such file" on the script.
func checkShebang(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil // not readable: only the kernel can tell
	}
	defer f.Close()
	buf := make([]byte, 256) // what Linux reads of a #! line
	n, _ := io.ReadFull(f, buf)
	line, ok := strings.CutPrefix(string(buf[:n]), "#!")
	if !ok {
		return nil
	}
	line, _, _ = strings.Cut(line, "\n")
	line = strings.TrimLeft(line, " \t")
	interp, arg, _ := strings.Cut(line, " ")
	if i := strings.IndexByte(interp, '\t'); i >= 0 {
		interp, arg = interp[:i], interp[i+1:]
	}
	if strings.HasSuffix(interp, "\r") {
		return fmt.Errorf("script %s: interpreter %q ends in a carriage return (the script has Windows line endings)", path, interp)
	}
	if interp == "" {
		return fmt.Errorf("script %s: the #! line names no interpreter", path)
	}
	if !filepath.IsAbs(interp) {
		return fmt.Errorf("script %s: interpreter %q is not an absolute path", path, interp)
	}
	if err := checkExecutable("interpreter", interp); err != nil {
		return fmt.Errorf("script %s: %w", path, err)
	}
	if filepath.Base(interp) == "env" {
		return checkEnvProgram(path, strings.TrimRight(arg, "\r"))
	}
	return nil
}

// checkEnvProgram looks up the program a "#!/usr/bin/env NAME" line runs.
func checkEnvProgram(script, args string) error {
	for _, f := range strings.Fields(args) {
		if strings.HasPrefix(f, "-") || strings.Contains(f, "=") {
			continue // env's options and assignments
		}
		if strings.Contains(f, "/") {
			return checkExecutable("interpreter", f)
		}
		if _, err := exec.LookPath(f); err != nil {
			return fmt.Errorf("script %s: interpreter %q (run by %s) is not found in $PATH", script, f, "env")
		}
		return nil
	}
	return nil
}
