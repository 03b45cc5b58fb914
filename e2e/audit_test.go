package e2e

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// audit is a table in the test's schema where agents record, with psql and
// the database's clock_timestamp(), when their work started and ended.
type audit struct {
	table string
	url   string // for the agents' env block: qd never gives them one
}

// newAudit creates the audit table in schema (which `qd migrate` made).
func newAudit(t *testing.T, schema string) audit {
	t.Helper()
	pool := testkit.MustPool(t)
	a := audit{table: schema + ".audit", url: testkit.MustDatabaseURL(t)}
	_, err := pool.Exec(context.Background(), `CREATE TABLE `+a.table+` (
		run bigint NOT NULL, task bigint NOT NULL, lane text NOT NULL, owner text NOT NULL,
		phase text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp())`)
	if err != nil {
		t.Fatalf("create audit table: %v", err)
	}
	return a
}

// shell is a shell function `audit PHASE` for agent scripts; it needs
// AUDIT_URL and OWNER in the agent's env.
func (a audit) shell() string {
	return fmt.Sprintf(`audit() {
  psql -qAtX -v ON_ERROR_STOP=1 "$AUDIT_URL" -c "INSERT INTO %s (run, task, lane, owner, phase) VALUES ($QD_RUN_ID, $QD_TASK_ID, '$QD_LANE', '$OWNER', '$1')" || exit 97
}
`, a.table)
}

// interval is the audited work of one run.
type interval struct {
	run        int64
	lane       string
	owner      string
	start, end time.Time
}

// intervals reads every audited run, and wants want of them, each with a
// start and an end.
func (a audit) intervals(t *testing.T, want int) []interval {
	t.Helper()
	pool := testkit.MustPool(t)
	rows, err := pool.Query(context.Background(), `SELECT run, min(lane), min(owner),
		min(at) FILTER (WHERE phase = 'start'), min(at) FILTER (WHERE phase = 'end'),
		count(*) FILTER (WHERE phase = 'start'), count(*) FILTER (WHERE phase = 'end')
		FROM `+a.table+` GROUP BY run ORDER BY run`)
	if err != nil {
		t.Fatalf("read audit: %v", err)
	}
	defer rows.Close()
	var out []interval
	for rows.Next() {
		var iv interval
		var start, end *time.Time
		var starts, ends int
		if err := rows.Scan(&iv.run, &iv.lane, &iv.owner, &start, &end, &starts, &ends); err != nil {
			t.Fatalf("read audit: %v", err)
		}
		if starts != 1 || ends != 1 {
			t.Fatalf("run %d audited %d starts and %d ends, want one of each", iv.run, starts, ends)
		}
		iv.start, iv.end = *start, *end
		out = append(out, iv)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read audit: %v", err)
	}
	if len(out) != want {
		t.Fatalf("audited %d runs, want %d", len(out), want)
	}
	return out
}

// checkNoLaneOverlap fails the test when two runs of one lane worked at the
// same time, and returns the most lanes that worked at once and the most
// runs that worked at once.
func checkNoLaneOverlap(t *testing.T, ivs []interval) (lanes, runs int) {
	t.Helper()
	byLane := map[string][]interval{}
	for _, iv := range ivs {
		byLane[iv.lane] = append(byLane[iv.lane], iv)
	}
	for lane, l := range byLane {
		sort.Slice(l, func(i, j int) bool { return l[i].start.Before(l[j].start) })
		for i := 1; i < len(l); i++ {
			if l[i].start.Before(l[i-1].end) {
				t.Errorf("lane %s: run %d (%s, from %s) started before run %d (%s) ended at %s",
					lane, l[i].run, l[i].owner, l[i].start.Format(time.RFC3339Nano),
					l[i-1].run, l[i-1].owner, l[i-1].end.Format(time.RFC3339Nano))
			}
		}
	}
	// Sweep the starts and ends in time order; an end at the same instant
	// as a start comes first.
	type event struct {
		at    time.Time
		lane  string
		delta int
	}
	var evs []event
	for _, iv := range ivs {
		evs = append(evs, event{iv.start, iv.lane, 1}, event{iv.end, iv.lane, -1})
	}
	sort.Slice(evs, func(i, j int) bool {
		if !evs[i].at.Equal(evs[j].at) {
			return evs[i].at.Before(evs[j].at)
		}
		return evs[i].delta < evs[j].delta
	})
	live := map[string]int{}
	n := 0
	for _, e := range evs {
		live[e.lane] += e.delta
		n += e.delta
		if live[e.lane] == 0 {
			delete(live, e.lane)
		}
		lanes, runs = max(lanes, len(live)), max(runs, n)
	}
	return lanes, runs
}
