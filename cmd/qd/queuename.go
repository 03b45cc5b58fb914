package main

import (
	"path/filepath"
	"strings"

	"github.com/qd-run/qd/lease"
)

// queueName says which queue url is and where it came from, for the line
// a listing on a terminal prints on stderr: "private cluster in
// ~/.local/state/qd/pg (from ./qd.hcl)", or the URL, password hidden,
// "(from $QD_DATABASE_URL)".
func (e *Env) queueName(url string) string {
	switch {
	case e.DatabaseURL != "":
		return lease.Redact(url) + " (from --db)"
	case e.Getenv("QD_DATABASE_URL") != "":
		return lease.Redact(url) + " (from $QD_DATABASE_URL)"
	}
	conf, err := e.Config()
	if err == nil && conf.Database != "" {
		return lease.Redact(url) + " (from database in " + e.shortPath(e.confPath) + ")"
	}
	c, err := e.privateCluster()
	if err != nil {
		return lease.Redact(url)
	}
	return "private cluster in " + homeShort(c.Dir(), e.Getenv) + " (" + e.configOrigin() + ")"
}

// configOrigin says where the state directory, and so the private
// cluster, came from: the config file read, or none.
func (e *Env) configOrigin() string {
	if e.confPath == "" {
		return "no config file: the default state_dir"
	}
	return "from " + e.shortPath(e.confPath)
}

// shortPath writes a path as a user would type it: ./qd.hcl for a file
// found in the working directory, ~/ for one under the home directory.
func (e *Env) shortPath(p string) string {
	if !filepath.IsAbs(p) && !strings.HasPrefix(p, ".") {
		return "./" + p
	}
	return homeShort(p, e.Getenv)
}

// homeShort writes p under $HOME as ~/...
func homeShort(p string, getenv func(string) string) string {
	home := getenv("HOME")
	if home == "" || home == "/" {
		return p
	}
	if rest, ok := strings.CutPrefix(p, strings.TrimSuffix(home, "/")+"/"); ok {
		return "~/" + rest
	}
	return p
}
