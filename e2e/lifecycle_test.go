package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure that after kill -9 of the daemon its child dies with it, and that a
// restart (same name, same state directory) kills what the child left
// behind, abandons the old run at once instead of waiting out its 5m lease,
// and runs the task again.
func TestDaemon_KillNineThenRestart(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	childPID, gcPID := filepath.Join(dir, "child.pid"), filepath.Join(dir, "grandchild.pid")
	agent := testkit.MustScript(t, dir, "long.sh", fmt.Sprintf(`if [ "$QD_ATTEMPT" = 1 ]; then
  sh -c 'exec sleep 1000' &
  echo $! > %s
  echo $$ > %s
  echo first attempt
  exec sleep 1000
fi
echo attempt $QD_ATTEMPT
`, gcPID, childPID))
	id := enqueue(t, qd, db, "k9", "long")
	body := fmt.Sprintf(`
agent "long" {
  command  = [%q]
  schedule = "@every 1s"
  lease    = "5m"
}`, agent)
	d := testkit.StartDaemon(t, qd, db, "phoenix", body, testkit.DaemonOptions{})
	child, gc := readPID(t, childPID, 15*time.Second), readPID(t, gcPID, 15*time.Second)
	d.Kill()
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("child %d to die with its daemon", child), func() bool { return !testkit.Alive(child) })
	if s := showTask(t, qd, db, id); s.Task.State != "running" {
		t.Fatalf("task is %s right after kill -9, want still running (its lease is 5m)", s.Task.State)
	}

	testkit.StartDaemon(t, qd, db, "phoenix", body, testkit.DaemonOptions{Dir: d.Dir})
	s := waitShow(t, qd, db, id, 20*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	if got := strings.Join(runStates(s), ","); got != "abandoned,completed" {
		t.Fatalf("runs %s, want abandoned,completed", got)
	}
	if s.Runs[0].Summary != "supervisor restarted" {
		t.Errorf("old run's summary %q, want \"supervisor restarted\"", s.Runs[0].Summary)
	}
	if s.Runs[1].Summary != "attempt 2" {
		t.Errorf("new run's summary %q, want \"attempt 2\"", s.Runs[1].Summary)
	}
	testkit.Eventually(t, 5*time.Second, fmt.Sprintf("grandchild %d of the killed daemon to be gone", gc), func() bool { return !testkit.Alive(gc) })
}

// Ensure SIGTERM drains within shutdown_grace: a child that exits on SIGTERM
// ends at once, one that ignores it is killed when the grace is over, the
// daemon exits 0, and both runs are abandoned with their attempts given back
// so that their tasks can be claimed again at once.
func TestDaemon_SigtermDrainsWithinGrace(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	politePID, stubbornPID := filepath.Join(dir, "polite.pid"), filepath.Join(dir, "stubborn.pid")
	polite := testkit.MustScript(t, dir, "polite.sh", fmt.Sprintf(`trap 'echo bye; exit 143' TERM
echo $$ > %s
while :; do sleep 0.1; done
`, politePID))
	stubborn := testkit.MustScript(t, dir, "stubborn.sh", fmt.Sprintf(`trap '' TERM
echo $$ > %s
while :; do sleep 0.1; done
`, stubbornPID))
	pid1 := enqueue(t, qd, db, "dr1", "polite")
	pid2 := enqueue(t, qd, db, "dr2", "stubborn")
	d := testkit.StartDaemon(t, qd, db, "drain", fmt.Sprintf(`
shutdown_grace = "3s"
agent "polite" {
  command  = [%q]
  schedule = "@every 1s"
}
agent "stubborn" {
  command  = [%q]
  schedule = "@every 1s"
}`, polite, stubborn), testkit.DaemonOptions{})
	p, s := readPID(t, politePID, 15*time.Second), readPID(t, stubbornPID, 15*time.Second)
	d.Signal(syscall.SIGTERM)
	if code := d.Wait(t, 3*time.Second+7*time.Second); code != 0 {
		t.Fatalf("daemon exit code %d after SIGTERM, want 0", code)
	}
	for _, pid := range []int{p, s} {
		if testkit.Alive(pid) {
			t.Errorf("child %d still runs after the daemon exited", pid)
		}
	}
	for _, id := range []string{pid1, pid2} {
		sh := showTask(t, qd, db, id)
		if sh.Task.State != "queued" || sh.Task.Attempts != 0 {
			t.Errorf("task %s: %s with %d attempts, want queued with 0 (the attempt given back)", id, sh.Task.State, sh.Task.Attempts)
		}
		if len(sh.Runs) != 1 || sh.Runs[0].State != "abandoned" || sh.Runs[0].Summary != "supervisor shutdown" {
			t.Errorf("task %s: runs %+v, want one abandoned with summary \"supervisor shutdown\"", id, sh.Runs)
		}
	}
	if r := showTask(t, qd, db, pid1).Runs; len(r) == 1 && (r[0].ExitCode == nil || *r[0].ExitCode != 143) {
		t.Errorf("polite child: exit %v signal %q, want exit 143 from its TERM trap", r[0].ExitCode, r[0].Signal)
	}
	if r := showTask(t, qd, db, pid2).Runs; len(r) == 1 && r[0].Signal != "SIGKILL" {
		t.Errorf("stubborn child: exit %v signal %q, want SIGKILL at the end of the grace", r[0].ExitCode, r[0].Signal)
	}
	for _, c := range []struct{ lane, agent, id string }{{"dr1", "polite", pid1}, {"dr2", "stubborn", pid2}} {
		out := testkit.MustQD(t, qd, db, "claim", "--lane", c.lane, "--agent", c.agent, "--lease", "1m")
		var l struct {
			TaskID int64 `json:"task_id"`
		}
		if err := json.Unmarshal([]byte(out), &l); err != nil || fmt.Sprint(l.TaskID) != c.id {
			t.Errorf("qd claim --lane %s: %q (%v), want task %s", c.lane, out, err, c.id)
		}
	}
}

// Ensure SIGHUP reloads the config without touching running children: an
// agent added to the file starts claiming, a removed one stops, a child of a
// changed agent runs on to completion, and an invalid file is reported in
// status while the old config keeps working.
func TestDaemon_SighupReload(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	agentBlock := func(name string) string {
		return fmt.Sprintf(`
agent %q {
  command  = [%q]
  schedule = "@every 1s"
}`, name, testkit.MustScript(t, dir, name+".sh", "echo \"$QD_AGENT did $QD_TASK_ID\"\n"))
	}
	keeperPID := filepath.Join(dir, "keeper.pid")
	keeper := func(parallel int) string {
		return fmt.Sprintf(`
agent "keeper" {
  command  = [%q]
  schedule = "@every 1s"
  parallel = %d
}`, testkit.MustScript(t, dir, "keeper.sh", fmt.Sprintf("echo $$ > %s\nsleep 8\necho kept\n", keeperPID)), parallel)
	}
	d := testkit.StartDaemon(t, qd, db, "reload", agentBlock("first")+keeper(1), testkit.DaemonOptions{})
	kept := enqueue(t, qd, db, "h0", "keeper")
	first := enqueue(t, qd, db, "h1", "first")
	second := enqueue(t, qd, db, "h2", "second")
	waitShow(t, qd, db, first, 15*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	readPID(t, keeperPID, 15*time.Second)
	time.Sleep(1500 * time.Millisecond) // ticks of the first agent pass
	if s := showTask(t, qd, db, second); s.Task.State != "queued" {
		t.Fatalf("task of an agent not in the config is %s, want queued", s.Task.State)
	}
	if s := showTask(t, qd, db, kept); s.Task.State != "running" {
		t.Fatalf("keeper task is %s before the reload, want running", s.Task.State)
	}

	// first goes, second comes, keeper changes while its child runs.
	d.WriteConfig(t, agentBlock("second")+keeper(2))
	d.Signal(syscall.SIGHUP)
	s := waitShow(t, qd, db, second, 15*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	if want := "second did " + second; len(s.Runs) != 1 || s.Runs[0].Summary != want {
		t.Fatalf("runs %+v: want one with summary %q", s.Runs, want)
	}
	s = waitShow(t, qd, db, kept, 15*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
	if len(s.Runs) != 1 || s.Runs[0].State != "completed" || s.Runs[0].Summary != "kept" {
		t.Fatalf("keeper runs %+v: want its one child to have run on through the reload and completed", s.Runs)
	}
	orphan := enqueue(t, qd, db, "h1", "first")
	time.Sleep(1500 * time.Millisecond) // ticks pass
	if s := showTask(t, qd, db, orphan); s.Task.State != "queued" {
		t.Fatalf("task of an agent removed by the reload is %s, want queued", s.Task.State)
	}

	// The header takes four lines, so the body starts on line 5.
	d.WriteConfig(t, "no_such_setting = 1"+agentBlock("first"))
	d.Signal(syscall.SIGHUP)
	var errText string
	testkit.Eventually(t, 10*time.Second, "status to report the failed reload", func() bool {
		errText = d.Status(t).ConfigError
		return errText != ""
	})
	if !strings.Contains(errText, "qd.hcl:5") || !strings.Contains(errText, "no_such_setting") {
		t.Errorf("config_error %q: want it to name qd.hcl:5 and no_such_setting", errText)
	}
	human := testkit.MustQD(t, qd, db, "status", "--socket", d.Socket)
	if !strings.Contains(human, "reload failed") {
		t.Errorf("qd status does not report the failed reload:\n%s", human)
	}
	again := enqueue(t, qd, db, "h2", "second")
	waitShow(t, qd, db, again, 15*time.Second, "done under the old config", func(s shown) bool { return s.Task.State == "done" })
	var names []string
	for _, a := range d.Status(t).Agents {
		names = append(names, a.Name)
	}
	sort.Strings(names)
	if got := strings.Join(names, ","); got != "keeper,second" {
		t.Errorf("status shows agents %s after the failed reload, want the old config's keeper,second", got)
	}
	if s := showTask(t, qd, db, orphan); s.Task.State != "queued" {
		t.Errorf("task of the removed agent is %s after the failed reload, want queued", s.Task.State)
	}
}

// Ensure `qd run` refuses a bad config at once, exit 2, naming file:line,
// before it starts anything, and `qd run --check` accepts a good one.
func TestDaemon_BadConfigFailsFast(t *testing.T) {
	t.Parallel()
	qd := testkit.MustBuild(t)
	db, _ := testkit.MustSchema(t)
	dir := t.TempDir()
	agent := testkit.MustScript(t, dir, "ok.sh", "echo ok\n")
	cases := []struct {
		name, body, want string
	}{
		{"unknown field", fmt.Sprintf("agent \"a\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n  colour   = \"red\"\n}\n", agent), ":4"},
		{"zero interval", fmt.Sprintf("agent \"a\" {\n  command  = [%q]\n  schedule = \"@every 0s\"\n}\n", agent), ":3"},
		{"never fires", fmt.Sprintf("\nagent \"a\" {\n  command  = [%q]\n  schedule = \"0 0 30 2 *\"\n}\n", agent), ":4"},
		{"negative lease", fmt.Sprintf("agent \"a\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n  lease    = \"-5s\"\n}\n", agent), ":4"},
		{"missing command", "agent \"a\" {\n  command  = [\"/nonexistent/agent.sh\"]\n  schedule = \"@every 1s\"\n}\n", ":2"},
		{"duplicate agent", fmt.Sprintf("agent \"a\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n}\nagent \"a\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n}\n", agent, agent), ":5"},
	}
	for i, c := range cases {
		path := filepath.Join(dir, fmt.Sprintf("bad%d.hcl", i))
		writeFile(t, path, c.body)
		_, errOut, code := testkit.QDWithin(t, 10*time.Second, qd, db, "run", "--config", path)
		if code != 2 || !strings.Contains(errOut, filepath.Base(path)+c.want) {
			t.Errorf("%s: qd run exit %d, stderr %q; want exit 2 naming %s%s", c.name, code, errOut, filepath.Base(path), c.want)
		}
	}
	good := filepath.Join(dir, "good.hcl")
	writeFile(t, good, fmt.Sprintf("agent \"a\" {\n  command  = [%q]\n  schedule = \"@every 1s\"\n}\n", agent))
	out, errOut, code := testkit.QDWithin(t, 10*time.Second, qd, db, "run", "--check", "--config", good)
	if code != 0 || !strings.Contains(out, "ok") {
		t.Errorf("qd run --check on a good config: exit %d, stdout %q, stderr %q; want exit 0 and ok", code, out, errOut)
	}
}

// Ensure a second SIGTERM during the drain skips the rest of the grace: a
// child that ignores SIGTERM is killed at once, not 60s later, the daemon
// still exits 0, and the run is released.
func TestDaemon_SecondSignalSkipsGrace(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "stubborn.pid")
	stubborn := testkit.MustScript(t, dir, "stubborn.sh", fmt.Sprintf(`trap '' TERM
echo $$ > %s
while :; do sleep 0.1; done
`, pidFile))
	id := enqueue(t, qd, db, "ss", "stubborn")
	d := testkit.StartDaemon(t, qd, db, "hurry", fmt.Sprintf(`
shutdown_grace = "60s"
agent "stubborn" {
  command  = [%q]
  schedule = "@every 1s"
}`, stubborn), testkit.DaemonOptions{})
	pid := readPID(t, pidFile, 15*time.Second)
	d.Signal(syscall.SIGTERM)
	d.WaitLog(t, "draining", 10*time.Second)
	if d.Exited() || !testkit.Alive(pid) {
		t.Fatalf("the first SIGTERM did not leave the daemon draining with its child alive")
	}
	d.Signal(syscall.SIGTERM)
	if code := d.Wait(t, 15*time.Second); code != 0 {
		t.Fatalf("daemon exit code %d after a second SIGTERM, want 0", code)
	}
	if testkit.Alive(pid) {
		t.Errorf("child %d still runs after the daemon exited", pid)
	}
	s := showTask(t, qd, db, id)
	if s.Task.State != "queued" || len(s.Runs) != 1 || s.Runs[0].State != "abandoned" {
		t.Errorf("task %s %s with runs %v, want queued with one abandoned run", id, s.Task.State, runStates(s))
	}
}

// Ensure a second daemon pointed at the socket of a live one refuses to start
// (the status socket is never stolen), and the first keeps answering.
func TestDaemon_LiveSocketNotStolen(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	d := testkit.StartDaemon(t, qd, db, "owner", "", testkit.DaemonOptions{})
	dir := t.TempDir()
	other := filepath.Join(dir, "other.hcl")
	writeFile(t, other, fmt.Sprintf("name = \"thief\"\nsocket = %q\nstate_dir = %q\n", d.Socket, filepath.Join(dir, "state")))
	_, errOut, code := testkit.QDWithin(t, 20*time.Second, qd, db, "run", "--config", other)
	if code == 0 || !strings.Contains(errOut, d.Socket) {
		t.Errorf("second daemon on a live socket: exit %d, stderr %q; want a refusal naming %s", code, errOut, d.Socket)
	}
	if st := d.Status(t); st.Supervisor != "owner" {
		t.Errorf("socket answered for %q after the attempt, want owner", st.Supervisor)
	}
}
