package lease

import (
	"fmt"
	"slices"
	"time"
)

// The events worth telling of. EventFailed is recorded by the provider
// wherever a task fails for good (a settlement, a reap, AbandonOwner);
// the others by the daemon that saw them.
const (
	EventFailed    = "failed"     // a task failed for good: its attempts are used up
	EventTimeout   = "timeout"    // a run was stopped by its agent's timeout
	EventStall     = "stall"      // a run was stopped by its agent's stall_timeout
	EventLeaseLost = "lease_lost" // a run's lease was lost, or could not be renewed in time
	// EventBudgetExhausted: a run's usage took its budget to its max for
	// the period; recorded once per budget and period.
	EventBudgetExhausted = "budget_exhausted"
)

// Events lists every event.
var Events = []string{EventFailed, EventTimeout, EventStall, EventLeaseLost, EventBudgetExhausted}

// ValidEvent reports whether e names an event.
func ValidEvent(e string) bool { return slices.Contains(Events, e) }

// NotificationStatus is where a notification is.
type NotificationStatus string

// The states of a notification.
const (
	// NotificationPending waits for its next try (DueAt).
	NotificationPending NotificationStatus = "pending"
	// NotificationSending is claimed by a sender until DueAt.
	NotificationSending NotificationStatus = "sending"
	NotificationSent    NotificationStatus = "sent"
	// NotificationFailed failed for good: no try is left.
	NotificationFailed NotificationStatus = "failed"
)

// Notification is one telling of one event about a run to one target (a
// command or a webhook), from the moment it is recorded.
type Notification struct {
	ID     int64
	TaskID int64
	RunID  int64
	Event  string // EventFailed, EventTimeout, EventStall, EventLeaseLost
	// Target names the command line or the webhook, redacted
	// (RedactWebhook): a sender finds the target it stands for in its own
	// config.
	Target string
	Status NotificationStatus
	// Tries counts the tries so far.
	Tries int
	// Detail is what the last try's command said or webhook answered, or
	// why it failed.
	Detail    string
	SentBy    string // the daemon that tried it last
	CreatedAt time.Time
	// DueAt is when a pending notification is tried next, or when a
	// sending one's claim runs out; zero once it is finished.
	DueAt      time.Time
	FinishedAt time.Time // zero until sent or failed for good
}

// NotificationJob is a claimed notification with the facts it tells.
type NotificationJob struct {
	Notification
	Run         Run // the run the event is about
	MaxAttempts int // of the run's task
	// EventAt is when the event was recorded, Age how long ago by the
	// provider's clock at the claim.
	EventAt time.Time
	Age     time.Duration
}

// NotifyRoute says that event of agent is told to target.
type NotifyRoute struct {
	Agent, Event, Target string
}

// NotifyTargetClaim asks for up to N notifications of Target.
type NotifyTargetClaim struct {
	Target string
	N      int
}

// NotifyClaim is one ClaimNotifications call.
type NotifyClaim struct {
	By      string
	Targets []NotifyTargetClaim
	// Lease is how long the claim holds each notification.
	Lease time.Duration
	// GiveUp is the age past which a pending notification is failed for
	// good rather than tried again; zero never gives up.
	GiveUp time.Duration
}

// NotifyResult is how one try went.
type NotifyResult struct {
	// Status is NotificationSent, NotificationFailed (for good) or
	// NotificationPending (tried again after RetryIn).
	Status  NotificationStatus
	Detail  string
	RetryIn time.Duration
}

// ValidateNotifyResult checks r.
func ValidateNotifyResult(id int64, r NotifyResult) error {
	switch r.Status {
	case NotificationSent, NotificationFailed, NotificationPending:
	default:
		return fmt.Errorf("%w: notification %d: status %q cannot finish a try", ErrInvalid, id, r.Status)
	}
	if r.RetryIn < 0 {
		return fmt.Errorf("%w: notification %d: retry delay %s is negative", ErrInvalid, id, r.RetryIn)
	}
	return nil
}

// GiveUpDetail is the detail of a notification failed for good because it
// was not sent within giveUp: tries is how many tries it had, last what
// the last one said.
func GiveUpDetail(giveUp time.Duration, tries int, last string) string {
	if tries == 0 {
		return fmt.Sprintf("given up: not sent within %s of the event; never tried, its target failed every try meanwhile", giveUp)
	}
	return fmt.Sprintf("given up: not sent within %s of the event, after %d tries; the last: %s", giveUp, tries, last)
}
