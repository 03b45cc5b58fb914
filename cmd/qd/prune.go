package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/qd-run/qd/daemon"
)

var pruneCommand = &command{
	name:    "prune",
	summary: "delete finished tasks, their runs and their log files",
	usage:   "--older-than DURATION [--dry-run] [--json]",
	help: `Deletes tasks that finished (done, failed, cancelled) more than DURATION
ago, with their runs. When the config names a state_dir, the daemon's log files
of those runs on this machine are deleted too, and the workdirs kept for them
(keep_workdir). --dry-run only counts.`,
	db:    true,
	json:  true,
	setup: setupPrune,
}

type pruneJSON struct {
	DryRun bool    `json:"dry_run"`
	Tasks  int64   `json:"tasks"`
	Runs   int64   `json:"runs"`
	Logs   int     `json:"log_files"`
	RunIDs []int64 `json:"run_ids"`
}

func setupPrune(fs *flag.FlagSet) runFunc {
	olderThan := durationFlag(fs, "older-than", 0, "prune tasks finished more than `DURATION` ago (required)")
	dryRun := fs.Bool("dry-run", false, "count what would be pruned; delete nothing")
	return func(ctx context.Context, env *Env, fs *flag.FlagSet, args []string) error {
		if err := noArgs(args); err != nil {
			return err
		}
		if !isSet(fs, "older-than") {
			return usageErrorf("prune: --older-than is required")
		}
		prov, err := env.Provider(ctx)
		if err != nil {
			return err
		}
		res, logs, err := daemon.Prune(ctx, prov, env.stateDir(), *olderThan, *dryRun)
		if err != nil {
			return fmt.Errorf("prune: %w", err)
		}
		out := pruneJSON{DryRun: *dryRun, Tasks: res.Tasks, Runs: res.Runs, RunIDs: res.RunIDs, Logs: logs}
		if out.RunIDs == nil {
			out.RunIDs = []int64{}
		}
		if env.JSON {
			return writeJSON(env.Stdout, out)
		}
		verb := "pruned"
		if *dryRun {
			verb = "would prune"
		}
		fmt.Fprintf(env.Stdout, "%s %s, %s, %s\n", verb, count(out.Tasks, "task", "tasks"), count(out.Runs, "run", "runs"), count(out.Logs, "log file", "log files"))
		return nil
	}
}
