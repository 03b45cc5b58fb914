package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// laneAgent writes an agent that audits its start and end around a short
// piece of work.
func laneAgent(t *testing.T, a audit, work string) string {
	return testkit.MustScript(t, t.TempDir(), "lane-agent.sh", a.shell()+`
audit start
sleep `+work+`
audit end
echo "done $QD_TASK_ID"
`)
}

func auditedAgent(name, script, owner string, a audit, parallel int) string {
	return fmt.Sprintf(`
agent %q {
  command  = [%q]
  schedule = "@every 1s"
  parallel = %d
  env = {
    AUDIT_URL = %q
    OWNER     = %q
  }
}`, name, script, parallel, a.url, owner)
}

// Ensure one daemon with parallel > 1 runs several lanes at once while a lane
// of limit 1 never has two runs working at the same time, and never more
// children than its parallelism.
func TestDaemon_LanesOfLimitOneNeverOverlap(t *testing.T) {
	t.Parallel()
	qd, db, a := mustAuditedQueue(t)
	const lanes, perLane, parallel = 4, 3, 3
	ids := enqueueLanes(t, qd, db, "l", lanes, perLane)
	testkit.StartDaemon(t, qd, db, "lanes", auditedAgent("work", laneAgent(t, a, "0.3"), "lanes", a, parallel), testkit.DaemonOptions{})
	for _, id := range ids {
		waitCompletedOnce(t, qd, db, id)
	}
	ivs := a.intervals(t, lanes*perLane)
	maxLanes, maxRuns := checkNoLaneOverlap(t, ivs)
	if maxLanes < 2 {
		t.Errorf("at most %d lane worked at once; parallel = %d should run several", maxLanes, parallel)
	}
	if maxRuns > parallel {
		t.Errorf("%d runs worked at once, more than parallel = %d", maxRuns, parallel)
	}
	t.Logf("%d runs, up to %d lanes at once", len(ivs), maxLanes)
}

// Ensure two daemons sharing one database both take work and never run two
// tasks of one lane at the same time.
func TestDaemon_TwoDaemonsNeverOverlapALane(t *testing.T) {
	t.Parallel()
	qd, db, a := mustAuditedQueue(t)
	script := laneAgent(t, a, "0.4")
	// Both daemons run before the tasks exist, so that they tick together.
	testkit.StartDaemon(t, qd, db, "twin-a", auditedAgent("work", script, "twin-a", a, 2), testkit.DaemonOptions{})
	testkit.StartDaemon(t, qd, db, "twin-b", auditedAgent("work", script, "twin-b", a, 2), testkit.DaemonOptions{})
	const lanes, perLane = 3, 4
	ids := enqueueLanes(t, qd, db, "t", lanes, perLane)
	owners := map[string]int{}
	for _, id := range ids {
		for _, r := range waitCompletedOnce(t, qd, db, id).Runs {
			owners[r.Owner]++
		}
	}
	ivs := a.intervals(t, lanes*perLane)
	maxLanes, _ := checkNoLaneOverlap(t, ivs)
	if owners["twin-a"] == 0 || owners["twin-b"] == 0 {
		t.Errorf("runs per daemon %v: both daemons should have taken work", owners)
	}
	if maxLanes < 2 {
		t.Errorf("at most %d lane worked at once across two daemons", maxLanes)
	}
	t.Logf("runs per daemon %v, up to %d lanes at once", owners, maxLanes)
}

// Ensure a lane block in the config sets the lane's limit at start, so an
// agent with parallel = 2 on that lane runs two tasks at once (never more),
// and qd lane list says the config set it.
func TestDaemon_LaneBlockLimit(t *testing.T) {
	t.Parallel()
	qd, db, a := mustAuditedQueue(t)
	var ids []string
	for range 4 {
		ids = append(ids, enqueue(t, qd, db, "wide", "work"))
	}
	body := auditedAgent("work", laneAgent(t, a, "1"), "wide", a, 2) + `
lane "wide" {
  max_running = 2
}`
	d := testkit.StartDaemon(t, qd, db, "wide", strings.Replace(body, `parallel = 2`, "parallel = 2\n  lanes = [\"wide\"]", 1), testkit.DaemonOptions{})
	for _, id := range ids {
		waitShow(t, qd, db, id, 40*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	}
	ivs := a.intervals(t, len(ids))
	most := 0
	for _, iv := range ivs {
		at := 0
		for _, o := range ivs {
			if !o.start.After(iv.start) && o.end.After(iv.start) {
				at++
			}
		}
		most = max(most, at)
	}
	if most != 2 {
		t.Errorf("at most %d runs of lane wide worked at once, want 2 (its limit from the config)", most)
	}
	out := testkit.MustQD(t, qd, db, "lane", "list", "--json")
	if !strings.Contains(out, `"set_by": "config `+d.Config+` (daemon wide)"`) {
		t.Errorf("qd lane list does not say the config set lane wide:\n%s", out)
	}
}

// mustAuditedQueue is testkit.MustQueue with an audit table in the schema.
func mustAuditedQueue(t *testing.T) (qd, db string, a audit) {
	t.Helper()
	qd = testkit.MustBuild(t)
	db, schema := testkit.MustSchema(t)
	testkit.MustQD(t, qd, db, "migrate")
	return qd, db, newAudit(t, schema)
}

// enqueueLanes makes lanes lanes of limit 1, named prefix0, prefix1 and so
// on, queues perLane tasks of agent work in each and returns their ids.
func enqueueLanes(t *testing.T, qd, db, prefix string, lanes, perLane int) []string {
	t.Helper()
	var ids []string
	for l := range lanes {
		lane := fmt.Sprintf("%s%d", prefix, l)
		testkit.MustQD(t, qd, db, "lane", "set", lane, "--max-running", "1")
		for range perLane {
			ids = append(ids, enqueue(t, qd, db, lane, "work"))
		}
	}
	return ids
}

// waitCompletedOnce waits for task id to be done and wants one run of it,
// completed.
func waitCompletedOnce(t *testing.T, qd, db, id string) shown {
	t.Helper()
	s := waitShow(t, qd, db, id, 40*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	if len(s.Runs) != 1 || s.Runs[0].State != "completed" {
		t.Errorf("task %s: runs %v, want one completed", id, runStates(s))
	}
	return s
}
