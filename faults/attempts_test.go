package faults

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure an agent that crashes at once runs exactly max_attempts times and
// its task ends failed with the last attempt's error kept.
func TestAttempts_CrashLoopStops(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("crash", "w", `{"mode":"crash","exit":3}`, 3)
	r.daemon("crash", r.agentHCL(agentConf{name: "w"}), testkit.DaemonOptions{})
	fig.fault("crash-loop", 1)
	r.waitStates("failed", nil, 60*time.Second)
	time.Sleep(3 * time.Second) // a fourth attempt would come within the backoff
	r.verify(expect{def: "failed"})
	runs := r.runsOf(id)
	var starts int
	var summary string
	r.scalar(&starts, `SELECT count(*) FROM {s}.audit WHERE task_id = $1 AND event = 'start'`, id)
	r.scalar(&summary, `SELECT summary FROM {s}.runs WHERE task_id = $1 ORDER BY id DESC LIMIT 1`, id)
	if runs != 3 || starts != 3 {
		t.Errorf("crash loop: %d runs, %d starts; want exactly 3", runs, starts)
	}
	if summary != "exited 3" {
		t.Errorf("last attempt's summary %q, want %q", summary, "exited 3")
	}
}

// Ensure a poison task that takes the daemon down (kill -9 at each start of
// its agent) stops after max_attempts restarts: attempts are counted when
// the restarted daemon abandons its earlier incarnation's run.
func TestAttempts_PoisonKillsDaemon(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	id := r.enqueue("poison", "w", `{"mode":"sleep","ms":60000}`, 3)
	body := r.agentHCL(agentConf{name: "w", lease: "30s", heartbeat: "5s"})
	d := r.daemon("poison", body, testkit.DaemonOptions{})
	dir := d.Dir
	for attempt := 1; ; attempt++ {
		var starts int
		testkit.Eventually(t, 30*time.Second, "the poison task to start or fail", func() bool {
			var state string
			r.scalar(&starts, `SELECT count(*) FROM {s}.audit WHERE task_id = $1 AND event = 'start'`, id)
			r.scalar(&state, `SELECT state FROM {s}.tasks WHERE id = $1`, id)
			return starts == attempt || state == "failed"
		})
		if starts < attempt {
			break
		}
		if attempt > 3 {
			t.Fatalf("poison task started %d times with max_attempts 3", starts)
		}
		d.Signal(syscall.SIGKILL)
		d.Wait(t, 5*time.Second)
		fig.fault("sigkill-daemon", 1)
		d = r.daemon("poison", body, testkit.DaemonOptions{Dir: dir})
	}
	r.verify(expect{def: "failed"})
	if runs := r.runsOf(id); runs != 3 {
		t.Errorf("poison task: %d runs, want 3", runs)
	}
}

// Ensure an agent whose program vanished after the config was loaded fails
// each attempt with a summary naming the program and the errno, and the
// task stops at max_attempts instead of looping.
func TestAttempts_CommandVanished(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	prog := testkit.MustScript(t, r.dir, "vanishing.sh", "exit 0\n")
	id := r.enqueue("gone", "w", `{}`, 2)
	d := r.daemon("vanished", r.agentHCL(agentConf{name: "w", command: []string{prog}}), testkit.DaemonOptions{})
	if err := os.Remove(prog); err != nil {
		t.Fatal(err)
	}
	fig.fault("missing-program", 1)
	r.verify(expect{def: "failed"})
	runs := r.runsOf(id)
	var summary string
	r.scalar(&summary, `SELECT summary FROM {s}.runs WHERE task_id = $1 ORDER BY id DESC LIMIT 1`, id)
	if runs != 2 {
		t.Errorf("task %d: %d runs with its program gone, want max_attempts (2)", id, runs)
	}
	if !strings.Contains(summary, prog) || !strings.Contains(summary, "ENOENT") {
		t.Errorf("summary %q does not name the program and the errno", summary)
	}
	if d.Exited() {
		t.Errorf("daemon exited when its agent's program vanished")
	}
}
