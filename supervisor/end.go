package supervisor

import (
	"time"

	"github.com/qd-run/qd/lease"
)

// End is how a run ended, given to Config.OnEnd once the run is settled
// and forgotten.
type End struct {
	Lease      lease.Lease // the run's lease (its payload left out)
	Settlement lease.Settlement
	// Reason is why the supervisor stopped the child: "timeout", "stall",
	// "cancel", "shutdown", "fenced" or "lease lost"; empty when the child
	// ended by itself.
	Reason string
	// Settled is true when the settlement was written: false when the lease
	// was lost (nothing may be written) or the provider stayed out of reach.
	Settled bool
	// Started is when the child was started, At when the run ended.
	Started, At time.Time
}

// FailedForGood reports whether the run used up its task's last attempt:
// the task is failed now.
func (e End) FailedForGood() bool {
	st := e.Settlement
	failing := st.Outcome == lease.RunFailed || (st.Outcome == lease.RunAbandoned && !st.Refund)
	return e.Settled && failing && e.Lease.Attempt >= e.Lease.MaxAttempts
}

// LeaseLost reports whether the run ended because its lease was lost or
// could not be renewed in time.
func (e End) LeaseLost() bool {
	return e.Reason == stopLeaseLost.String() || e.Reason == stopFenced.String()
}
