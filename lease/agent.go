package lease

import "time"

// AgentPause says that nothing of one agent is claimed: its queued tasks
// wait, on every lane and for every claimer, until it is resumed. Runs
// already live are not touched.
type AgentPause struct {
	Agent string
	// At is when the agent was paused.
	At time.Time
	// SetBy records who paused it, such as "qd agent pause" or "qd ui".
	SetBy string
}
