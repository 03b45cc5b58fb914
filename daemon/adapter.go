package daemon

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/scheduler"
	"github.com/qd-run/qd/supervisor"
)

// runner adapts the supervisor to the scheduler.
type runner struct{ d *daemon }

// Running is the agent's running children. While claims wait after a
// change of database server (see claimHold) or after starts failed for
// want of resources (startHold), it says the agent is full; once such a
// hold ends, and until a child starts again, it leaves one slot free, so
// that a claim takes one task to try rather than a batch to give back.
// While the supervisor holds a completion past its lease it says every
// agent is full: a claim now could take that task again.
func (r runner) Running(agent string) int {
	if r.d.holding() || r.d.starts.held() || r.d.sup.LateCompletions() > 0 {
		return math.MaxInt32
	}
	n := r.d.sup.Running(agent)
	if a := r.d.config().Agent(agent); a != nil && r.d.starts.recovering() {
		n = max(n, a.Parallel-1)
	}
	return n
}

func (r runner) Start(agent string, l *lease.Lease, claimed time.Time) error {
	conf := r.d.config()
	a := conf.Agent(agent)
	if a == nil { // removed by a reload between the claim and now
		return r.refund(l, "agent "+agent+" is no longer in the config")
	}
	if r.d.holding() { // the claim ran as the server changed
		return r.refund(l, "given back unstarted: the database server changed moments ago, and runs it lost may still be running")
	}
	if why := r.d.starts.heldBecause(); why != "" { // a claim in flight as starts failed
		return r.refund(l, "given back unstarted: starts are held: "+why)
	}
	if foreign(a) {
		if err := r.d.openRuns(); err != nil {
			r.d.logger.Error("cannot start a run as another user", "agent", agent, "run_id", l.RunID, "error", err)
			return r.refund(l, "given back unstarted: "+err.Error())
		}
	}
	sp := spec(conf, a)
	sp.Claimed = claimed
	parents, err := r.parentResults(l)
	if err != nil {
		r.d.logger.Error("cannot read the results of the tasks a run waited for", "run_id", l.RunID, "task_id", l.TaskID, "error", err)
		return r.refund(l, "given back unstarted: "+err.Error())
	}
	sp.ParentResults = parents
	r.d.runStarted(l, cmp.Or(sp.Lease, lease.DefaultLease))
	err = r.d.sup.Start(l, sp)
	r.d.starts.note(err, r.d.logger)
	return err
}

// parentResults is the results of the tasks l's task waited for, one JSON
// object keyed by task id, nil when it waited for none: the file
// $QD_PARENT_RESULTS names. A task that waited for none costs no read.
func (r runner) parentResults(l *lease.Lease) ([]byte, error) {
	if !l.Waited {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := r.d.queue.ParentResults(ctx, l.TaskID)
	if err != nil || len(res) == 0 {
		return nil, err
	}
	return json.Marshal(res)
}

// refund gives back, unstarted and with its attempt refunded, a run
// claimed for an agent that a reload removed meanwhile, or by a claim that
// ran as the database server changed or as starts were held. A refusal of
// that one run (its lease already lost, say) is an error too.
func (r runner) refund(l *lease.Lease, why string) error {
	if err := r.d.sup.GiveBack(l, why); err != nil {
		return fmt.Errorf("give back run %d of agent %s (%s): %w", l.RunID, l.Agent, why, err)
	}
	return nil
}

func spec(conf *config.Config, a *config.Agent) supervisor.Spec {
	env := make(map[string]string, len(a.Env)+1)
	for k, v := range a.Env {
		env[k] = v
	}
	env["QD_SOCKET"] = socketOf(conf, a)
	return supervisor.Spec{
		Agent: a.Name, Command: a.Command, Dir: a.Dir, Env: env,
		Lease: a.Lease, Heartbeat: a.Heartbeat, Timeout: a.Timeout,
		StallTimeout: a.StallTimeout, KillGrace: a.KillGrace, RetryBackoff: a.RetryBackoff,
		MaxDeferrals: a.MaxDeferrals,
		Limits:       limitsOf(a), User: credentialOf(a), Workdir: a.Workdir == config.WorkdirFresh,
		KeepWorkdir: a.KeepWorkdir, Box: boxOf(conf, a), MergeOutput: a.Output == config.OutputMerged,
	}
}

func schedulerAgents(conf *config.Config) []scheduler.Agent {
	out := make([]scheduler.Agent, 0, len(conf.Agents))
	for _, a := range conf.Agents {
		out = append(out, scheduler.Agent{
			Name: a.Name, Schedule: a.Sched, Spec: a.Schedule,
			Lanes: a.Lanes, Parallel: a.Parallel, Lease: a.Lease, Limits: a.Limits, Budget: a.Budget,
		})
	}
	return out
}

func schedulerPeriodics(conf *config.Config) []scheduler.Periodic {
	out := make([]scheduler.Periodic, 0, len(conf.Periodics))
	for _, p := range conf.Periodics {
		out = append(out, scheduler.Periodic{
			Name: p.Name, Schedule: p.Sched, CatchUp: p.CatchUp == config.CatchUpOnce,
			Task: lease.EnqueueParams{
				Lane: p.Lane, Agent: p.Agent, Payload: []byte(p.Payload),
				Priority: p.Priority, MaxAttempts: p.MaxAttempts, DedupeKey: periodicKey(p),
			},
		})
	}
	return out
}

// periodicKey is the dedupe key of a periodic block's tasks: with overlap
// "skip", a tick while one of its tasks is unfinished enqueues nothing
// (the queue returns the unfinished one); with "queue", none.
func periodicKey(p config.Periodic) string {
	if p.Overlap == config.OverlapQueue {
		return ""
	}
	return "periodic:" + p.Name
}
