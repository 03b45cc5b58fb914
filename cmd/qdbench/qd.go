package main

import (
	"errors"
	"os/exec"
	"path/filepath"
)

// findQD returns the qd binary the bench runs as its daemon: the one --qd
// names, else the qd next to exe (this program), else the first qd in PATH.
// Built side by side (go build -o bin/ ./cmd/...), qdbench so runs the qd
// of its own checkout. Not finding one is bad usage, reported before the
// bench starts rather than minutes later at its end-to-end part.
func findQD(given, exe string) (string, error) {
	if given != "" {
		p, err := exec.LookPath(given)
		if err != nil {
			var ee *exec.Error
			if errors.As(err, &ee) {
				err = ee.Err
			}
			return "", usageErrorf("--qd %s: %v", given, err)
		}
		return filepath.Abs(p)
	}
	where := "in PATH"
	if exe != "" {
		beside := filepath.Join(filepath.Dir(exe), "qd")
		if p, err := exec.LookPath(beside); err == nil {
			return p, nil
		}
		where = "next to " + exe + " or in PATH"
	}
	if p, err := exec.LookPath("qd"); err == nil {
		return filepath.Abs(p)
	}
	return "", usageErrorf("no qd binary %s to run as the daemon; name one with --qd BINARY", where)
}
