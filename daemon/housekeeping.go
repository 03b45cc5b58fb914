package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/supervisor"
)

// housekeeping abandons the runs that earlier incarnations of this daemon
// (proved gone by the state directory's lock, their children killed by
// KillOrphans) left marked running, then prunes finished tasks when the
// config sets a retention.
func (d *daemon) housekeeping(ctx context.Context) {
	for delay := time.Second; ; delay = min(delay*2, 30*time.Second) {
		err := d.abandonEarlier(ctx)
		if err == nil {
			err = d.recallLast(ctx)
		}
		if err == nil {
			break
		}
		d.setDBError(err)
		if sleepCtx(ctx, delay) != nil {
			return
		}
	}
	for {
		every := time.Hour
		if r := d.config().Retention; r > 0 {
			d.prune(ctx, r)
			every = min(max(r/10, time.Minute), time.Hour)
		}
		if sleepCtx(ctx, every) != nil {
			return
		}
	}
}

// recallLast reads from the queue how each agent's last ended run on this
// daemon's name ended, for the status, so that a restart does not forget
// it; an end seen meanwhile is kept.
func (d *daemon) recallLast(ctx context.Context) error {
	conf := d.config()
	for _, a := range conf.Agents {
		runs, err := d.queue.Runs(ctx, lease.RunFilter{Agent: a.Name, Owner: conf.Name, Limit: 20})
		if err != nil {
			return err
		}
		for _, r := range runs {
			if r.State == lease.RunRunning {
				continue
			}
			d.mu.Lock()
			if _, seen := d.last[a.Name]; !seen {
				d.last[a.Name] = api.LastOutcomeOf(r)
			}
			d.mu.Unlock()
			break
		}
	}
	return nil
}

// abandonEarlier abandons the runs of the earlier incarnations, then
// forgets them. A state directory with no record of incarnations cannot
// prove any earlier daemon of this name gone: their runs still marked
// running are left to their leases, and said so.
func (d *daemon) abandonEarlier(ctx context.Context) error {
	if d.inc.fresh {
		runs, err := d.queue.Runs(ctx, lease.RunFilter{State: lease.RunRunning, Owner: d.config().Name})
		if err != nil {
			return err
		}
		var ids []int64
		for _, r := range runs {
			if r.Instance != d.instance {
				ids = append(ids, r.ID)
			}
		}
		if len(ids) > 0 {
			d.logger.Warn("the state directory holds no record of earlier incarnations (new, or deleted while no daemon ran), yet runs of this supervisor's name are running under other instances: they cannot be proved gone and are left to their leases",
				"runs", ids, "state_dir", d.config().StateDir)
		}
		d.inc.fresh = false
	}
	for name, instances := range d.inc.byName() {
		ids, err := d.queue.AbandonOwner(ctx, name, instances, "supervisor restarted")
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			d.logger.Warn("abandoned runs of an earlier incarnation", "runs", ids, "instances", instances)
		}
	}
	if err := d.inc.released(); err != nil {
		d.logger.Warn("could not forget the earlier incarnations; the next start abandons their runs again", "error", err)
	}
	return nil
}

func (d *daemon) prune(ctx context.Context, older time.Duration) {
	res, _, err := Prune(ctx, d.queue, d.config().StateDir, older, false)
	if err != nil {
		d.logger.Warn("prune finished tasks", "error", err)
	}
	if res.Tasks > 0 {
		d.logger.Info("pruned finished tasks", "tasks", res.Tasks, "runs", res.Runs, "older_than", older)
	}
}

// Prune deletes the tasks finished more than older ago with their runs,
// then the runs' log files under stateDir (none when stateDir is empty),
// and the workdirs their agents kept there, and counts the log files
// removed. It is the one way history is pruned: by
// the daemon's retention and by `qd prune`. With dryRun it deletes nothing
// and counts the rows and the log files it would delete. A log file that
// cannot be removed is an error naming its run; the rows are gone by then.
func Prune(ctx context.Context, q lease.Provider, stateDir string, older time.Duration, dryRun bool) (res lease.PruneResult, logs int, err error) {
	res, err = q.Prune(ctx, older, dryRun)
	if err != nil || stateDir == "" {
		return res, 0, err
	}
	remove, verb := os.Remove, "remove"
	if dryRun {
		remove, verb = exists, "find"
	}
	var errs []error
	for _, id := range res.RunIDs {
		if !dryRun {
			_ = os.Remove(supervisor.StreamsPath(stateDir, id))
			// The run's fresh workdir, if its agent kept it.
			if err := os.RemoveAll(supervisor.WorkPath(stateDir, id)); err != nil {
				errs = append(errs, fmt.Errorf("remove the kept workdir of run %d: %w", id, err))
			}
		}
		err := remove(supervisor.LogPath(stateDir, id))
		switch {
		case err == nil:
			logs++
		case !errors.Is(err, os.ErrNotExist):
			errs = append(errs, fmt.Errorf("%s log of run %d: %w", verb, id, err))
		}
	}
	return res, logs, errors.Join(errs...)
}

// exists is os.Remove for a dry run: it reports what removing path would.
func exists(path string) error {
	_, err := os.Lstat(path)
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
