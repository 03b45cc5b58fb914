package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/qd-run/qd/backend"
)

var versionCommand = &command{
	name:    "version",
	summary: "print qd's version",
	usage:   "",
	help: `Prints the version, the Go release it was built with, the platform, and the
queue schema version it is built for (docs/database.md, "Upgrading").
qd --version and qd -V print the same.`,
	setup: func(*flag.FlagSet) runFunc {
		return func(_ context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "qd %s (%s, %s/%s, schema %d)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH, backend.SchemaVersion())
			return nil
		}
	},
}

// version is set at build time with -ldflags "-X main.version=..."; when it
// is not, Version falls back to the module version `go install` records.
var version = ""

// Version returns qd's version: the linked-in one, else the module's, else
// "devel" with the VCS revision when the build recorded one.
func Version() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel-" + s.Value[:12]
		}
	}
	return "devel"
}
