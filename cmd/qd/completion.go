package main

import (
	"context"
	"embed"
	"flag"
	"io"
	"slices"
)

// completionScripts are the scripts `qd completion SHELL` prints. Each is
// a thin layer over `qd __complete` (complete.go), which knows the
// commands, flags, agents and lanes.
//
//go:embed completions/qd.bash completions/qd.zsh completions/qd.fish
var completionScripts embed.FS

// shells are the shells qd has a completion script for.
var shells = []string{"bash", "zsh", "fish"}

var completionCommand = &command{
	name:    "completion",
	summary: "print the shell completion script for bash, zsh or fish",
	usage:   "bash|zsh|fish",
	help: `Prints a script that completes qd's commands, flags, agent names (from the
config file) and lane names (from the config's lane blocks and agents, and
from the database when it answers within two seconds). Load it:

  bash: source <(qd completion bash)        (in ~/.bashrc)
  zsh:  source <(qd completion zsh)         (in ~/.zshrc, after compinit)
  fish: qd completion fish > ~/.config/fish/completions/qd.fish

The script asks qd on each TAB (qd __complete), so what it offers follows
the config file and the database as they are then.`,
	setup: func(*flag.FlagSet) runFunc { return runCompletion },
}

func runCompletion(_ context.Context, env *Env, _ *flag.FlagSet, args []string) error {
	if len(args) != 1 {
		return usageErrorf("completion: want one shell argument (bash, zsh or fish), got %d", len(args))
	}
	if !slices.Contains(shells, args[0]) {
		return usageErrorf("completion: no script for shell %q (want bash, zsh or fish)", args[0])
	}
	f, err := completionScripts.Open("completions/qd." + args[0])
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(env.Stdout, f)
	return err
}

// shellWords are the arguments of `qd completion`.
func shellWords() []candidate {
	out := make([]candidate, 0, len(shells))
	for _, s := range shells {
		out = append(out, candidate{word: s})
	}
	return out
}
