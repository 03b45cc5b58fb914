package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure five daemons and three `qd claim --limit` scripts sharing one
// rate limit (10/1s, burst 0) never start more than 10 runs in any second
// (11 in a closed second: the unit GCRA's boundary admits), by the claim's
// record of each start and by the children's own, through a kill -9 of a
// daemon and a database that refuses two daemons for a few seconds.
func TestLimits_ManyClaimers(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	const rate = 10
	run := 20 * time.Second
	if *soak {
		run = 40 * time.Second
	}
	r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ('lim', 1000)`, r.schema))
	for range 40 * int(run/time.Second) {
		r.enqueue("lim", "w", `{"mode":"sleep","ms":50}`, 3)
	}
	px := newProxy(t, "127.0.0.1:5432")
	body := "limit \"api\" {\n  rate = \"10/1s\"\n  burst = 0\n}\n" +
		r.agentHCL(agentConf{name: "w", parallel: 4, lanes: []string{"lim"}, extra: `  limits = ["api"]`})
	var daemons []*testkit.Daemon
	for i := range 5 {
		var via []string
		if i >= 3 {
			via = []string{r.viaURL(px.Addr())}
		}
		daemons = append(daemons, r.daemon(fmt.Sprintf("lim-%d", i), body, testkit.DaemonOptions{}, via...))
	}
	start := time.Now()
	var wg sync.WaitGroup
	var scripted sync.Map
	for s := range 3 {
		wg.Go(func() {
			for time.Since(start) < run {
				out, _, code := testkit.QDWithin(t, 30*time.Second, r.qd, r.url, "claim", "--lane", "lim", "--limit", "api",
					"--wait", "2", "--owner", fmt.Sprintf("script-%d", s))
				if code != 0 {
					continue
				}
				var id int64
				if _, err := fmt.Sscanf(out[strings.Index(out, `"run_id":`)+len(`"run_id":`):], "%d", &id); err == nil {
					scripted.Store(id, true)
					testkit.QD(t, r.qd, r.url, "complete", fmt.Sprint(id))
				}
			}
		})
	}
	time.Sleep(run / 3)
	daemons[0].Kill()
	fig.fault("kill-9", 1)
	time.Sleep(run / 6)
	px.Refuse()
	fig.fault("pg-refuse", 1)
	time.Sleep(3 * time.Second)
	px.Restore()
	for time.Since(start) < run {
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	for _, d := range daemons[1:] {
		d.Signal(15)
	}
	for _, d := range daemons[1:] {
		d.Wait(t, 20*time.Second)
	}
	claimed := r.starts(`SELECT started_at FROM {s}.runs WHERE lane = 'lim' ORDER BY started_at`)
	children := r.starts(`SELECT at FROM {s}.audit WHERE event = 'start' ORDER BY at`)
	n, worst, at := worstWindow(claimed, time.Second)
	cn, cworst, _ := worstWindow(children, time.Second)
	nScripted := 0
	scripted.Range(func(any, any) bool { nScripted++; return true })
	t.Logf("%d starts in %s (%d by scripts), worst second %d at %s; children's record: %d starts, worst second %d",
		n, run, nScripted, worst, at.Format("15:04:05.000"), cn, cworst)
	fig.add(func(f *figures) {
		f.limits = append(f.limits, fmt.Sprintf("10/1s over 5 daemons and 3 scripts, %s: %d starts (%d by scripts), worst 1 s window %d (claims) and %d (children)",
			run, n, nScripted, worst, cworst))
	})
	if worst > rate+1 {
		t.Errorf("a second held %d starts by the claims' record, more than the rate %d and the boundary's 1", worst, rate)
	}
	// A child reports its start after it was spawned, which takes a
	// varying time on a loaded host, so its record may bunch a little.
	if cworst > rate+3 {
		t.Errorf("a second held %d starts by the children's record, more than the rate %d with slack 3", cworst, rate)
	}
	// Most of the run's seconds, minus the refusal and the daemons' start.
	if min := rate * int(run/time.Second) / 2; n < min {
		t.Errorf("only %d runs started in %s under a limit of %d/s, want at least %d", n, run, rate, min)
	}
	if nScripted == 0 {
		t.Errorf("no `qd claim --limit` script claimed anything")
	}
}

// starts reads the times one query lists.
func (r *rig) starts(sql string) []time.Time {
	r.t.Helper()
	var out []time.Time
	var at time.Time
	r.eachRow(sql, func() { out = append(out, at) }, &at)
	return out
}

// worstWindow returns how many times ts holds, the most of them in a
// closed window of length w, and where that window starts.
func worstWindow(ts []time.Time, w time.Duration) (n, worst int, at time.Time) {
	ts = append([]time.Time(nil), ts...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	j := 0
	for i := range ts {
		for j < len(ts) && !ts[j].After(ts[i].Add(w)) {
			j++
		}
		if j-i > worst {
			worst, at = j-i, ts[i]
		}
	}
	return len(ts), worst, at
}

// Ensure a child that runs `qd defer 2s` and exits 75 has its task tried
// again 2 s later without losing its attempt, that exiting 75 alone waits
// the agent's retry_backoff, and that past max_deferrals the run fails as
// a failed exit would.
func TestDefer_RefundsAttempt(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	script := fmt.Sprintf(`n=$(cat %[1]s/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > %[1]s/n
if [ $n -eq 1 ]; then %[2]s defer 2s || exit 9; fi
echo "429: try later"
exit 75`, r.dir, r.qd)
	body := r.agentHCL(agentConf{name: "d", lanes: []string{"defer"}, command: []string{"/bin/sh", "-c", script},
		extra: "  max_deferrals = 3"})
	id := r.enqueue("defer", "d", `{}`, 1)
	r.daemon("defer", body, testkit.DaemonOptions{})
	r.waitStates("failed", nil, 40*time.Second)
	type run struct {
		state    string
		deferred bool
		summary  string
		started  time.Time
		finished time.Time
	}
	var runs []run
	var x run
	r.eachRow(fmt.Sprintf(`SELECT state, deferred, summary, started_at, finished_at FROM {s}.runs WHERE task_id = %d ORDER BY id`, id),
		func() { runs = append(runs, x) }, &x.state, &x.deferred, &x.summary, &x.started, &x.finished)
	if len(runs) != 4 {
		t.Fatalf("got %d runs, want 3 deferred and 1 failed: %+v", len(runs), runs)
	}
	for i, rn := range runs[:3] {
		if rn.state != "abandoned" || !rn.deferred {
			t.Errorf("run %d: %s, deferred %v (%q); want abandoned and deferred", i+1, rn.state, rn.deferred, rn.summary)
		}
	}
	if last := runs[3]; last.state != "failed" || last.deferred || !strings.Contains(last.summary, "max_deferrals") {
		t.Errorf("run 4: %s, deferred %v, summary %q; want failed past max_deferrals", last.state, last.deferred, last.summary)
	}
	if gap := runs[1].started.Sub(runs[0].finished); gap < 2*time.Second {
		t.Errorf("the run after `qd defer 2s` started %s after the deferral, want at least 2s", gap)
	}
	if gap := runs[2].started.Sub(runs[1].finished); gap < time.Second {
		t.Errorf("the run after a bare exit 75 started %s after it, want at least retry_backoff (1s)", gap)
	}
	var attempts, deferrals int
	r.scalar(&attempts, fmt.Sprintf(`SELECT attempts FROM {s}.tasks WHERE id = %d`, id))
	r.scalar(&deferrals, fmt.Sprintf(`SELECT deferrals FROM {s}.tasks WHERE id = %d`, id))
	if attempts != 1 || deferrals != 3 {
		t.Errorf("task: %d attempts, %d deferrals; want 1 (the failed run's) and 3", attempts, deferrals)
	}
}

// Ensure a budget of 10 whose runs each report 1.0 starts exactly 10 runs
// with one daemon at parallel 1, tells budget_exhausted once though two
// daemons serve the agent, and lets runs start again once the period the
// reports fall in is over (the reports moved a day back stand for the
// rollover).
func TestBudget_StopsRuns(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	for range 15 {
		r.enqueue("pay", "p", `{}`, 3)
	}
	script := r.qd + ` usage 1.0 --note "one call" || exit 9`
	body := "budget \"daily\" {\n  max = 10\n  period = \"1d\"\n  timezone = \"Europe/Paris\"\n}\n" +
		r.agentHCL(agentConf{name: "p", lanes: []string{"pay"}, command: []string{"/bin/sh", "-c", script},
			extra: "  budget = \"daily\"\n  on_failure = [\"/bin/true\"]\n  notify_on = [\"budget_exhausted\"]"})
	da := r.daemon("budget-a", body, testkit.DaemonOptions{})
	count := func(sql string) int {
		var n int
		r.scalar(&n, sql)
		return n
	}
	testkit.Eventually(t, 40*time.Second, "ten runs done", func() bool {
		return count(`SELECT count(*) FROM {s}.runs WHERE state = 'completed'`) >= 10
	})
	r.daemon("budget-b", body, testkit.DaemonOptions{})
	time.Sleep(4 * time.Second) // ticks of both daemons, every second
	runs := count(`SELECT count(*) FROM {s}.runs`)
	if runs != 10 {
		t.Errorf("%d runs started under a budget of 10 with runs reporting 1.0 each at parallel 1, want exactly 10", runs)
	}
	var spent float64
	r.scalar(&spent, `SELECT sum(amount)::float8 FROM {s}.budget_usage WHERE budget = 'daily'`)
	if spent != 10 {
		t.Errorf("the period's reports add up to %g, want 10", spent)
	}
	testkit.Eventually(t, 20*time.Second, "the budget_exhausted notification", func() bool {
		return count(`SELECT count(*) FROM {s}.notifications WHERE event = 'budget_exhausted'`) >= 1
	})
	time.Sleep(2 * time.Second)
	if n := count(`SELECT count(*) FROM {s}.notifications WHERE event = 'budget_exhausted'`); n != 1 {
		t.Errorf("budget_exhausted told %d times with two daemons, want once", n)
	}
	if bs := da.Status(t).Budgets; len(bs) != 1 || bs[0].Name != "daily" || !bs[0].Exhausted || bs[0].Spent != 10 {
		t.Errorf("qd status shows budgets %+v, want daily spent 10 of 10", bs)
	}
	out := testkit.MustQD(t, r.qd, r.url, "budget", "list", "--json")
	if !strings.Contains(out, `"exhausted": true`) {
		t.Errorf("qd budget list does not say the budget is spent:\n%s", out)
	}
	r.exec(`UPDATE ` + r.schema + `.budget_usage SET at = at - interval '1 day'`)
	testkit.Eventually(t, 30*time.Second, "runs of the next period", func() bool {
		return count(`SELECT count(*) FROM {s}.runs`) > 10
	})
	fig.add(func(f *figures) {
		f.limits = append(f.limits, fmt.Sprintf("budget 10, runs reporting 1.0, parallel 1: %d runs in the period, budget_exhausted told once over 2 daemons", runs))
	})
}

// Ensure that with parallel 4 a budget of 10 starts at most 10 runs plus
// those in flight when it was reached (3 more here), as docs/limits.md
// says, and at least the 10 it allows.
func TestBudget_ParallelBound(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.exec(fmt.Sprintf(`INSERT INTO %s.lanes (name, max_running) VALUES ('pay4', 10)`, r.schema))
	for range 20 {
		r.enqueue("pay4", "p", `{}`, 3)
	}
	script := r.qd + ` usage 1.0 || exit 9; sleep 0.3`
	body := "budget \"daily\" {\n  max = 10\n  period = \"1d\"\n}\n" +
		r.agentHCL(agentConf{name: "p", lanes: []string{"pay4"}, parallel: 4, command: []string{"/bin/sh", "-c", script},
			extra: "  budget = \"daily\""})
	r.daemon("budget-4", body, testkit.DaemonOptions{})
	var runs int
	testkit.Eventually(t, 40*time.Second, "the budget spent", func() bool {
		var spent float64
		r.scalar(&spent, `SELECT coalesce(sum(amount), 0)::float8 FROM {s}.budget_usage`)
		return spent >= 10
	})
	time.Sleep(4 * time.Second)
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	if runs < 10 || runs > 13 {
		t.Errorf("%d runs started under a budget of 10 at parallel 4, want 10 to 13 (10 plus the 3 in flight)", runs)
	}
	fig.add(func(f *figures) {
		f.limits = append(f.limits, fmt.Sprintf("budget 10, parallel 4: %d runs in the period", runs))
	})
}

// Ensure a child's `qd spend` takes its units from the limit for every
// claimer (the limit owes them, and the next claim waits), that spending
// on a limit that does not exist exits 2, and that the socket refuses a
// spend from outside a run.
func TestSpend_FromChild(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.enqueue("spend", "s", `{}`, 1)
	script := fmt.Sprintf(`%[1]s spend tok 30 > %[2]s/spent || exit 9
%[1]s spend nosuch 1 2> %[2]s/nosuch; echo $? > %[2]s/nosuch.code`, r.qd, r.dir)
	body := "limit \"tok\" {\n  rate = \"60/1m\"\n}\n" +
		r.agentHCL(agentConf{name: "s", lanes: []string{"spend"}, command: []string{"/bin/sh", "-c", script},
			extra: `  limits = ["tok"]`})
	d := r.daemon("spender", body, testkit.DaemonOptions{})
	r.waitStates("done", nil, 30*time.Second)
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(r.dir, name))
		if err != nil {
			t.Fatalf("read %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read("spent"); got != "tok: -30 available" {
		t.Errorf("qd spend tok 30 printed %q, want \"tok: -30 available\" (the claim's unit and 30 more)", got)
	}
	if code, msg := read("nosuch.code"), read("nosuch"); code != "2" || !strings.Contains(msg, `limit "nosuch" is not declared`) {
		t.Errorf("qd spend nosuch 1: exit %s, %q; want 2 saying it is not declared", code, msg)
	}
	out := testkit.MustQD(t, r.qd, r.url, "limit", "list", "--json")
	if !strings.Contains(out, `"available": -`) {
		t.Errorf("qd limit list after the spend does not show the debt:\n%s", out)
	}
	cmd := exec.Command(r.qd, "spend", "tok", "1")
	cmd.Env = append(testkit.Environ(), "QD_SOCKET="+d.Socket)
	out2, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out2), "only a run may report what it spent") {
		t.Errorf("qd spend from outside a run through the socket: %v, %q; want it refused", err, out2)
	}
}
