package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
)

var versionCommand = &command{
	name:    "version",
	summary: "print qd's version",
	usage:   "",
	setup: func(*flag.FlagSet) runFunc {
		return func(_ context.Context, env *Env, _ *flag.FlagSet, args []string) error {
			if err := noArgs(args); err != nil {
				return err
			}
			fmt.Fprintf(env.Stdout, "qd %s (%s, %s/%s)\n", Version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		}
	},
}
