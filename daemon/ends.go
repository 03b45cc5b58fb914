package daemon

import (
	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/notify"
	"github.com/qd-run/qd/supervisor"
)

// runEnded is the supervisor's OnEnd: it counts the run's end in the
// metrics, keeps the agent's last outcome for the status, and wakes the
// notification sender when the run ended in a way worth telling. It never blocks:
// what is told is in the queue already (a task failed for good records
// its event where it fails, a timeout or a stall with its settlement), and
// what only the daemon saw (a lost lease, a settlement that could not be
// written) is handed to the sender to record.
func (d *daemon) runEnded(e supervisor.End) {
	d.runMetrics(e)
	d.mu.Lock()
	d.last[e.Lease.Agent] = api.LastOutcomeOf(lease.Run{ID: e.Lease.RunID, TaskID: e.Lease.TaskID,
		State: e.Settlement.Outcome, Summary: e.Settlement.Summary, FinishedAt: e.At})
	d.mu.Unlock()
	if d.sender == nil {
		return
	}
	told := false
	for _, event := range events(e) {
		told = true
		if event == lease.EventLeaseLost || (!e.Settled && event != lease.EventFailed) {
			d.sender.Record(e.Lease.RunID, event)
		}
	}
	if told {
		d.sender.Kick()
	}
}

// events names what is worth telling about how a run ended.
func events(e supervisor.End) []string {
	var out []string
	switch {
	case e.Reason == "timeout":
		out = append(out, lease.EventTimeout)
	case e.Reason == "stall":
		out = append(out, lease.EventStall)
	case e.LeaseLost():
		out = append(out, lease.EventLeaseLost)
	}
	if e.FailedForGood() {
		out = append(out, lease.EventFailed)
	}
	return out
}

// notifyPlan is whom the current config tells of what, read by the
// notification sender at every poll.
func (d *daemon) notifyPlan() notify.Plan {
	conf := d.config()
	plan := notify.Plan{Timeout: conf.NotifyRetry.Timeout, Backoff: conf.NotifyRetry.Backoff, GiveUp: conf.NotifyRetry.GiveUp}
	for _, a := range conf.Agents {
		if !a.Notify.Enabled() {
			continue
		}
		for _, event := range a.Notify.On {
			for _, t := range targets(a.Notify) {
				plan.Routes = append(plan.Routes, notify.Route{Agent: a.Name, Event: event, Target: t})
			}
		}
	}
	return plan
}

func targets(n config.Notify) []notify.Target {
	var out []notify.Target
	if len(n.OnFailure) > 0 {
		out = append(out, notify.Target{Command: n.OnFailure})
	}
	if n.Webhook != "" {
		out = append(out, notify.Target{Webhook: n.Webhook})
	}
	return out
}
