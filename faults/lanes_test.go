package faults

import (
	"fmt"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure five daemons racing over dozens of lanes never run more of a lane
// at once than its limit (1, or 3 for every fifth lane), and that every task
// runs to completion exactly once at a time.
func TestLanes_BoundUnderFiveDaemons(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	rnd := rng(t)
	lanes, perLane := 24, 4
	if *soak {
		lanes, perLane = 60, 10
	}
	for i := range lanes {
		limit := 1
		if i%5 == 0 {
			limit = 3
		}
		r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ($1, $2)`, r.schema), fmt.Sprintf("l%02d", i), limit)
	}
	for range perLane {
		for i := range lanes {
			r.enqueue(fmt.Sprintf("l%02d", i), "w", fmt.Sprintf(`{"mode":"sleep","ms":%d}`, 50+rnd.IntN(400)), 3)
		}
	}
	body := r.agentHCL(agentConf{name: "w", parallel: 6})
	for i := range 5 {
		r.daemon(fmt.Sprintf("lanes-%d", i), body, testkit.DaemonOptions{})
	}
	r.verify(expect{timeout: 3 * time.Minute})
	var maxAttempts int
	r.scalar(&maxAttempts, `SELECT max(attempts) FROM {s}.tasks`)
	if maxAttempts != 1 {
		t.Errorf("a task took %d attempts with no fault injected", maxAttempts)
	}
}
