package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a daemon whose wall clock jumps forward and back by hours while
// it runs tasks, beside a daemon with a true clock, neither reaps a live
// lease early nor keeps one late: leases are decided by the database's
// clock and local deadlines by the monotonic clock, so no task runs twice
// at once, none is lost, none takes a second attempt. The jumps move only
// the jumping daemon's schedule: after a step back its next tick must
// still come within one interval of its clock.
//
// The jumps are made with the daemon's test-only clock hook
// (QD_TEST_CLOCK_SKEW_FILE): libfaketime does not reach a Go program,
// which reads the clock through the vDSO and not through libc.
func TestClock_JumpingDaemonClock(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var ids []int64
	for i := range 6 {
		for range 3 {
			ids = append(ids, r.enqueue(fmt.Sprintf("ck%d", i), "w", `{"mode":"sleep","ms":1200}`, 3))
		}
	}
	// Runs longer than the lease: their leases are renewed across jumps.
	for i := range 2 {
		ids = append(ids, r.enqueue(fmt.Sprintf("cklong%d", i), "w", `{"mode":"sleep","ms":7000}`, 3))
	}
	skew := filepath.Join(r.dir, "skew")
	setSkew := func(d string) {
		if err := os.WriteFile(skew, []byte(d), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	setSkew("0s")
	// Both daemons run a periodic: its ticks are recorded in order in the
	// database, so one from the jumping daemon's future would hold back
	// the other's; such a tick must be refused.
	agents := r.agentHCL(agentConf{name: "w", parallel: 3, lease: "4s", heartbeat: "1s"})
	body := agents +
		"periodic \"pulse\" {\n  schedule = \"@every 1s\"\n  agent = \"w\"\n  lane = \"ckpulse\"\n  payload = \"{\\\"mode\\\":\\\"sleep\\\",\\\"ms\\\":20}\"\n}\n"
	a := r.daemon("clock-true", body, testkit.DaemonOptions{})
	b := r.daemon("clock-jumps", body, testkit.DaemonOptions{Env: []string{"QD_TEST_CLOCK_SKEW_FILE=" + skew}})

	// nextIn is how far ahead of the jumping daemon's own clock its next
	// tick is.
	nextIn := func(offset time.Duration) time.Duration {
		for _, a := range b.Status(t).Agents {
			if a.Name == "w" {
				return a.NextTick.Sub(time.Now().Add(offset))
			}
		}
		t.Fatal("agent w missing from the jumping daemon's status")
		return 0
	}
	jumps := []struct {
		skew   string
		offset time.Duration
	}{{"2h", 2 * time.Hour}, {"-1h", -time.Hour}, {"-15m", -15 * time.Minute}, {"1h30m", 90 * time.Minute}, {"0s", 0}}
	var aheadMax time.Duration
	stopPoll := poll(100*time.Millisecond, func() {
		var ahead *time.Duration
		r.scalar(&ahead, `SELECT (SELECT last_tick - clock_timestamp() FROM {s}.periodic WHERE name = 'pulse')`)
		if ahead != nil {
			aheadMax = max(aheadMax, *ahead)
		}
	})
	var worst time.Duration
	for _, j := range jumps {
		time.Sleep(800 * time.Millisecond)
		setSkew(j.skew)
		fig.fault("clock-jump", 1)
		time.Sleep(1100 * time.Millisecond) // a tick of the old schedule, then the clock seen
		n := nextIn(j.offset)
		worst = max(worst, n)
		t.Logf("clock at %s: next tick in %s", j.skew, n.Round(time.Millisecond))
		if n > 1500*time.Millisecond {
			t.Errorf("after the clock jumped to %s the next tick of an @every 1s agent is %s away", j.skew, n.Round(time.Millisecond))
		}
	}
	stopPoll()
	if aheadMax > 10*time.Second {
		t.Errorf("the periodic's last tick was recorded %s ahead of the database's clock", aheadMax.Round(time.Second))
	}
	if !strings.Contains(b.Log(), "ahead of the database's clock") {
		t.Errorf("the jumping daemon did not say its periodic tick was refused as ahead of the database's clock")
	}
	var recent int
	r.scalar(&recent, `SELECT count(*) FROM {s}.tasks WHERE lane = 'ckpulse' AND created_at > clock_timestamp() - interval '2 seconds'`)
	if recent == 0 {
		t.Errorf("no periodic tick was enqueued in the last 2s after the jumps: the ticks are held back")
	}
	// The periodic ends, so that its tasks can all be done.
	for _, d := range []*testkit.Daemon{a, b} {
		d.WriteConfig(t, "shutdown_grace = \"5s\"\n"+agents)
		d.Signal(syscall.SIGHUP)
	}
	fig.add(func(f *figures) {
		f.clockShifts = append(f.clockShifts, fmt.Sprintf("%d jumps of -3h..+2h: next tick at most %s away", len(jumps), worst.Round(time.Millisecond)))
	})
	r.verify(expect{})
	var maxAttempts, fromJumper int
	r.scalar(&maxAttempts, `SELECT max(attempts) FROM {s}.tasks`)
	r.scalar(&fromJumper, `SELECT count(*) FROM {s}.runs WHERE owner = 'clock-jumps'`)
	if maxAttempts != 1 {
		t.Errorf("a task took %d attempts: a lease was reaped or lost while its daemon's clock jumped", maxAttempts)
	}
	if fromJumper == 0 {
		t.Errorf("the daemon whose clock jumped ran none of the %d tasks", len(ids))
	}
	t.Logf("%d tasks, %d run by the daemon whose clock jumped", len(ids), fromJumper)
}
