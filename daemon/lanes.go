package daemon

import (
	"context"
	"fmt"
	"time"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
)

// laneSetBy is what the lanes a config sets record as their source.
func laneSetBy(conf *config.Config) string {
	return fmt.Sprintf("config %s (daemon %s)", conf.Source(), conf.Name)
}

// wantLanes asks keepLanes to apply the config's lane blocks.
func (d *daemon) wantLanes() {
	select {
	case d.lanesDirty <- struct{}{}:
	default:
	}
}

// keepLanes applies the config's lane, limit and budget blocks at start and after every
// reload, retrying while the database cannot be reached, until ctx ends. A
// lane the config does not name is left as it is; one it names gets the
// config's settings, whatever `qd lane set` said before.
func (d *daemon) keepLanes(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.lanesDirty:
		}
		for delay := time.Second; ; delay = min(2*delay, 30*time.Second) {
			err := d.applyLanes(ctx)
			if err == nil {
				break
			}
			d.logger.Warn("apply the config's lanes; will retry", "error", err, "retry_in", delay)
			d.setDBError(err)
			select {
			case <-ctx.Done():
				return
			case <-d.lanesDirty: // a newer config: apply that one
			case <-time.After(delay):
			}
		}
	}
}

func (d *daemon) applyLanes(ctx context.Context) error {
	conf := d.config()
	for _, l := range conf.Lanes {
		u := l.Update()
		u.SetBy = laneSetBy(conf)
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := d.queue.SetLane(tctx, u)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", l.Pos(), err)
		}
		d.logger.Debug("lane set from the config", "lane", got.Name, "max_running", got.MaxRunning, "paused", got.Paused)
	}
	for _, l := range conf.RateLimits {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := d.queue.SetLimit(tctx, l.Update(laneSetBy(conf), conf.LimitAgents(l.Name)))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", l.Pos(), err)
		}
		d.logger.Debug("limit set from the config", "limit", got.Name, "rate", lease.FormatRate(got.Rate, got.Per),
			"burst", got.Burst)
	}
	for _, b := range conf.Budgets {
		tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		got, err := d.queue.SetBudget(tctx, b.Update(laneSetBy(conf), conf.BudgetAgents(b.Name)))
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %w", b.Pos(), err)
		}
		d.logger.Debug("budget set from the config", "budget", got.Name, "max", got.Max, "period", got.Period)
	}
	return nil
}
