package faults

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
)

// Ensure 1,000 lanes of one task each, drained by five daemons at once, end
// with every task done by exactly one run and no lane over its limit of
// one; the time from the daemons' start to the last task done is reported.
func TestManyLanes_ThousandLanesFiveDaemons(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	lanes := 1000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < lanes; i += 8 {
				_, _, err := r.prov.Enqueue(ctx, lease.EnqueueParams{
					Lane: fmt.Sprintf("many-%04d", i), Agent: "w", Payload: []byte(`{"mode":"sleep","ms":20}`), MaxAttempts: 3})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("enqueue: %v", err)
	}
	fig.fault("many-lanes", 1)

	// Ticks are rare: the daemons drain the lanes by claiming again as
	// their runs end, not by waiting for the schedule.
	body := r.agentHCL(agentConf{name: "w", parallel: 5, lease: "30s", heartbeat: "5s",
		env: map[string]string{"FA_TICK_MS": "10000"}})
	start := r.dbNow()
	for i := range 5 {
		r.daemon(fmt.Sprintf("many-%d", i), body, testkit.DaemonOptions{})
	}
	r.verify(expect{timeout: 3 * time.Minute})
	var last time.Time
	r.scalar(&last, `SELECT max(finished_at) FROM {s}.runs`)
	drain := last.Sub(start)
	fig.add(func(f *figures) {
		f.drains = append(f.drains, fmt.Sprintf("%d lanes by 5 daemons in %s", lanes, drain.Round(100*time.Millisecond)))
	})
	t.Logf("%d lanes of one task drained by 5 daemons in %s", lanes, drain.Round(time.Millisecond))

	var runs, tasks, maxAttempts, owners int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	r.scalar(&tasks, `SELECT count(*) FROM {s}.tasks WHERE state = 'done'`)
	r.scalar(&maxAttempts, `SELECT max(attempts) FROM {s}.tasks`)
	r.scalar(&owners, `SELECT count(DISTINCT owner) FROM {s}.runs`)
	if runs != lanes || tasks != lanes || maxAttempts != 1 {
		t.Errorf("%d tasks done by %d runs (most attempts %d), want %d each done once", tasks, runs, maxAttempts, lanes)
	}
	if owners != 5 {
		t.Errorf("runs were made by %d daemons, want all 5 to take part", owners)
	}
}
