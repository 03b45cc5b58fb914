package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
)

var pruneCommand = &command{
	name:    "prune",
	summary: "delete finished tasks, their runs and their log files",
	usage:   "--older-than DURATION [--dry-run] [--json]",
	help: `Deletes tasks that finished (done, failed, cancelled) more than DURATION
ago, with their runs. When the config names a state_dir, the daemon's log files
of those runs on this machine are deleted too. --dry-run only counts.`,
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
		res, err := prov.Prune(ctx, *olderThan, *dryRun)
		if err != nil {
			return err
		}
		out := pruneJSON{DryRun: *dryRun, Tasks: res.Tasks, Runs: res.Runs, RunIDs: res.RunIDs}
		if out.RunIDs == nil {
			out.RunIDs = []int64{}
		}
		if !*dryRun {
			if out.Logs, err = removeLogs(env, res.RunIDs); err != nil {
				return err
			}
		}
		if env.JSON {
			return writeJSON(env.Stdout, out)
		}
		verb := "pruned"
		if *dryRun {
			verb = "would prune"
		}
		fmt.Fprintf(env.Stdout, "%s %d tasks, %d runs, %d log files\n", verb, out.Tasks, out.Runs, out.Logs)
		return nil
	}
}

// removeLogs deletes the log files of runs under the config's state_dir.
func removeLogs(env *Env, runIDs []int64) (int, error) {
	dir := env.stateDir()
	if dir == "" {
		return 0, nil
	}
	n := 0
	for _, id := range runIDs {
		err := os.Remove(runLogPath(dir, id))
		switch {
		case err == nil:
			n++
		case !errors.Is(err, fs.ErrNotExist):
			return n, fmt.Errorf("prune: remove log of run %d: %w", id, err)
		}
	}
	return n, nil
}
