package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a hostile agent that spends eight seconds attacking every other
// run through the daemon's socket (progress reports for them and cancels
// of their tasks, with no token, forged tokens and tokens stolen from
// their environments, and from a process out of its group where runs have
// cgroups) has no effect on them: every request is refused, silent
// victims are still stopped by their stall_timeout on time, busy ones
// complete, no task is cancelled or has a cancel request, and the hostile
// run may still report its own progress.
func TestSocket_HostileAgent(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const stall, grace = 3 * time.Second, time.Second
	var stalled, busy []int64
	for i := range 3 {
		stalled = append(stalled, r.enqueue(fmt.Sprintf("hs%d", i), "v", `{"mode":"sleep","ms":60000}`, 1))
	}
	for i := range 2 {
		busy = append(busy, r.enqueue(fmt.Sprintf("hw%d", i), "w", `{"mode":"sleep","ms":5000}`, 1))
	}
	body := r.agentHCL(agentConf{name: "v", parallel: 3, extra: fmt.Sprintf("stall_timeout = %q\nkill_grace = %q", stall, grace)}) +
		r.agentHCL(agentConf{name: "w", parallel: 2}) +
		r.agentHCL(agentConf{name: "h", extra: `kill_grace = "1s"`})
	d := r.daemon("hostile", body, testkit.DaemonOptions{})
	c := d.Status(t).Containment
	if c.Kind != "cgroup" && os.Getenv("CI") == "true" {
		t.Fatalf("runs not in cgroups under CI: %s (%s)", c.Kind, c.Reason)
	}
	// Every victim runs before the attack starts; it lasts well past the
	// silent ones' stall_timeout.
	h := r.enqueue("hh", "h", fmt.Sprintf(`{"mode":"hostile","ms":8000,"victims":%d,"setsid":%t}`, len(stalled)+len(busy), c.Kind == "cgroup"), 1)
	states := map[int64]string{}
	for _, id := range stalled {
		states[id] = "failed"
	}
	r.verify(expect{states: states, timeout: 90 * time.Second})

	hRun, _ := r.waitEvent("start", h, time.Second)
	var rep struct {
		Sent, Refused, Own, Victims int
		Wrong                       string
	}
	b, err := os.ReadFile(filepath.Join(r.dir, fmt.Sprintf("hostile.%d", hRun)))
	if err == nil {
		err = json.Unmarshal(b, &rep)
	}
	if err != nil {
		t.Fatalf("the hostile agent's report: %v", err)
	}
	fig.fault("hostile agent on the socket", rep.Victims) // runs attacked
	effects := rep.Sent - rep.Refused
	if rep.Sent == 0 || rep.Victims != len(stalled)+len(busy) || effects != 0 {
		t.Errorf("hostile agent: %d requests at %d victims, %d refused; first not refused: %s", rep.Sent, rep.Victims, rep.Refused, rep.Wrong)
	}
	if rep.Own != 204 {
		t.Errorf("the hostile run's progress for itself answered %d, want 204", rep.Own)
	}
	for _, id := range append(append([]int64{}, stalled...), busy...) {
		var requested bool
		var livedSec float64
		var summary string
		r.scalar(&requested, `SELECT cancel_requested FROM {s}.tasks WHERE id = $1`, id)
		r.scalar(&summary, `SELECT coalesce(string_agg(summary, '; '), '') FROM {s}.runs WHERE task_id = $1`, id)
		r.scalar(&livedSec, `SELECT coalesce(extract(epoch FROM max(finished_at - started_at)), 0)::float8 FROM {s}.runs WHERE task_id = $1`, id)
		lived := time.Duration(livedSec * float64(time.Second)).Round(time.Millisecond)
		if requested {
			effects++
			t.Errorf("task %d has a cancel request", id)
		}
		if slices.Contains(stalled, id) && (lived > stall+grace+2*time.Second || !strings.Contains(summary, "stalled")) {
			effects++
			t.Errorf("silent task %d lived %s (%q), want stopped by its %s stall_timeout while under attack", id, lived, summary, stall)
		}
	}
	fig.add(func(f *figures) {
		f.hostileSent += rep.Sent
		f.hostileRefused += rep.Refused
		f.hostileEffects += effects
	})
	t.Logf("hostile agent: %d requests at %d runs, %d refused, %d effects on them", rep.Sent, rep.Victims, rep.Refused, effects)
}
