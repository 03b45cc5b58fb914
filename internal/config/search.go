package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SearchPaths lists where qd looks for its config file, in order:
// $QD_CONFIG, ./qd.hcl, $XDG_CONFIG_HOME/qd/qd.hcl (or
// ~/.config/qd/qd.hcl) and /etc/qd/qd.hcl.
func SearchPaths() []string {
	var paths []string
	if p := os.Getenv("QD_CONFIG"); p != "" {
		paths = append(paths, p)
	}
	paths = append(paths, "qd.hcl")
	if dir := os.Getenv("XDG_CONFIG_HOME"); dir != "" {
		paths = append(paths, filepath.Join(dir, "qd", "qd.hcl"))
	} else if home, err := os.UserHomeDir(); err == nil {
		paths = append(paths, filepath.Join(home, ".config", "qd", "qd.hcl"))
	}
	return append(paths, "/etc/qd/qd.hcl")
}

// Find returns the first of SearchPaths that exists, and the paths it
// tried. When none exists the error wraps fs.ErrNotExist.
func Find() (path string, tried []string, err error) {
	for _, p := range SearchPaths() {
		tried = append(tried, p)
		_, err := os.Stat(p)
		if err == nil {
			return p, tried, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", tried, fmt.Errorf("find config: %w", err)
		}
	}
	return "", tried, fmt.Errorf("find config: none of %s: %w", strings.Join(tried, ", "), fs.ErrNotExist)
}
