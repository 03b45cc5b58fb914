package daemon

import (
	"os"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/notify"
	"github.com/qd-run/qd/supervisor"
)

// runEnded is the supervisor's OnEnd: it counts the run's end in the
// metrics, keeps the agent's last outcome for the status, and tells whoever the agent's config names of what went
// wrong. It never blocks: the notifier only queues.
func (d *daemon) runEnded(e supervisor.End) {
	d.runMetrics(e)
	d.mu.Lock()
	d.last[e.Lease.Agent] = api.LastOutcome{RunID: e.Lease.RunID, TaskID: e.Lease.TaskID,
		Outcome: string(e.Settlement.Outcome), Summary: e.Settlement.Summary, At: e.At}
	d.mu.Unlock()
	a := d.config().Agent(e.Lease.Agent)
	if a == nil || !a.Notify.Enabled() || d.notifier == nil {
		return
	}
	for _, event := range events(e) {
		if a.Notify.Wants(event) {
			d.notifier.Notify(d.event(e, event), targets(a.Notify)...)
		}
	}
}

// events names what is worth telling about how a run ended.
func events(e supervisor.End) []string {
	var out []string
	switch {
	case e.Reason == "timeout":
		out = append(out, config.EventTimeout)
	case e.Reason == "stall":
		out = append(out, config.EventStall)
	case e.LeaseLost():
		out = append(out, config.EventLeaseLost)
	}
	if e.FailedForGood() {
		out = append(out, config.EventFailed)
	}
	return out
}

func (d *daemon) event(e supervisor.End, event string) notify.Event {
	host, _ := os.Hostname()
	st := e.Settlement
	return notify.Event{Event: event, TaskID: e.Lease.TaskID, RunID: e.Lease.RunID, Agent: e.Lease.Agent,
		Lane: e.Lease.Lane, Attempt: e.Lease.Attempt, MaxAttempts: e.Lease.MaxAttempts, Outcome: string(st.Outcome),
		ExitCode: st.ExitCode, Signal: st.Signal, Summary: st.Summary, OutputTail: st.OutputTail,
		Host: host, Daemon: d.config().Name, At: e.At.UTC().Truncate(time.Millisecond)}
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
