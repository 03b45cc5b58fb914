package notify

import (
	"strings"
	"time"

	"github.com/qd-run/qd/lease"
)

// Defaults of a Plan, and the limits of one try.
const (
	// CommandTimeout and WebhookTimeout bound one try of a command and of
	// a webhook, unless Plan.Timeout says otherwise.
	CommandTimeout = 30 * time.Second
	WebhookTimeout = 10 * time.Second
	// DefaultBackoff is the wait before the first retry; each retry waits
	// twice the one before, up to MaxBackoff.
	DefaultBackoff = 30 * time.Second
	MaxBackoff     = time.Hour
	// DefaultGiveUp is how long after it was recorded a notification is
	// failed for good if it could not be sent.
	DefaultGiveUp = 24 * time.Hour
	// PerTarget bounds the tries of one target under way at once.
	PerTarget = 4
	// detailMax bounds what is recorded of a command's output or a
	// webhook's answer.
	detailMax = 500
)

// Event is what happened, as a notification tells it (the JSON on a
// command's stdin and in a webhook's body).
type Event struct {
	Event       string    `json:"event"` // failed, timeout, stall, lease_lost
	TaskID      int64     `json:"task_id"`
	RunID       int64     `json:"run_id"`
	Agent       string    `json:"agent"`
	Lane        string    `json:"lane"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	Outcome     string    `json:"outcome"`
	ExitCode    *int      `json:"exit_code"`
	Signal      string    `json:"signal,omitempty"`
	Summary     string    `json:"summary"`
	OutputTail  string    `json:"output_tail"`
	Host        string    `json:"host"`   // the host of the daemon that tells
	Daemon      string    `json:"daemon"` // the daemon that held the run
	At          time.Time `json:"at"`     // when the event was recorded
	// Notification identifies this telling: the same on every try of it,
	// so that a receiver told twice (its sender died between telling and
	// recording it) can tell.
	Notification int64 `json:"notification_id"`
	Try          int   `json:"try"`
}

// eventOf is the event a claimed notification tells.
func eventOf(j lease.NotificationJob, host string) Event {
	r := j.Run
	return Event{Event: j.Event, TaskID: j.TaskID, RunID: j.RunID, Agent: r.Agent, Lane: r.Lane,
		Attempt: r.Attempt, MaxAttempts: j.MaxAttempts, Outcome: string(r.State), ExitCode: r.ExitCode,
		Signal: r.Signal, Summary: r.Summary, OutputTail: r.OutputTail, Host: host, Daemon: r.Owner,
		At: j.EventAt.UTC().Truncate(time.Millisecond), Notification: j.ID, Try: j.Tries}
}

// Target is one whom to tell: a command or a webhook.
type Target struct {
	Command []string
	Webhook string
}

// String is how the target is shown, logged and recorded: the command
// line, or the webhook redacted (lease.RedactWebhook).
func (t Target) String() string {
	if t.Webhook != "" {
		return lease.RedactWebhook(t.Webhook)
	}
	return strings.Join(t.Command, " ")
}

// Route says that Event of Agent is told to Target.
type Route struct {
	Agent, Event string
	Target       Target
}

// Plan is whom the sender tells and how hard it tries. It is read again
// at every poll, so a reloaded config takes effect at once.
type Plan struct {
	Routes []Route
	// Timeout bounds one try of any target; zero: CommandTimeout for a
	// command, WebhookTimeout for a webhook.
	Timeout time.Duration
	// Backoff is the wait before the first retry (DefaultBackoff when
	// zero); each retry waits twice the one before, up to MaxBackoff.
	Backoff time.Duration
	// GiveUp is how long after it was recorded a notification not yet
	// sent is failed for good (DefaultGiveUp when zero).
	GiveUp time.Duration
}

func (p Plan) timeout(t Target) time.Duration {
	switch {
	case p.Timeout > 0:
		return p.Timeout
	case t.Webhook != "":
		return WebhookTimeout
	}
	return CommandTimeout
}

// retryIn is the wait after the tries-th failed try.
func (p Plan) retryIn(tries int) time.Duration {
	d := p.Backoff
	if d <= 0 {
		d = DefaultBackoff
	}
	for i := 1; i < tries && d < MaxBackoff; i++ {
		d *= 2
	}
	return min(d, MaxBackoff)
}

func (p Plan) giveUp() time.Duration {
	if p.GiveUp > 0 {
		return p.GiveUp
	}
	return DefaultGiveUp
}

// Counts says what a sender did since it started, and which targets are
// down now.
type Counts struct {
	Sent    uint64 // notifications sent
	Failed  uint64 // notifications failed for good
	Retried uint64 // failed tries that are tried again later
	Down    []Down
}

// Down is a target whose last try failed.
type Down struct {
	Target string    // as Target.String
	Since  time.Time // the first failed try since it last answered
	Fails  int       // failed tries since then
	Error  string    // what the last try said
}

// bound cuts s to detailMax bytes of valid UTF-8 (the database refuses
// anything else).
func bound(s string) string {
	if len(s) > detailMax {
		s = s[:detailMax] + "…"
	}
	return strings.ToValidUTF8(s, "�")
}
