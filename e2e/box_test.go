package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/internal/testkit"
)

// dialEnv, set to HOST:PORT, makes the test binary try one TCP connection
// there and print "dial ok" or why not: the boxed runs' tool.
const dialEnv = "QD_E2E_DIAL"

func dial(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		fmt.Println("dial failed:", err)
		return 1
	}
	c.Close()
	fmt.Println("dial ok")
	return 0
}

// nobodyCred is the user the tests run daemons and agents as.
var nobodyCred = &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}

// boxMode is who a box test's daemon runs as, and its agents.
type boxMode struct {
	name   string
	daemon *syscall.Credential // nil: root, this process
	user   string              // the agents' user setting; "" for none
}

var boxModes = []boxMode{
	{"Root", nil, ""},
	{"RootAsNobody", nil, "nobody"},
	{"Unprivileged", nobodyCred, "nobody"}, // its own user
}

// boxRig is what a box test's daemon is made of: its directory, outside
// /tmp (a box has a /tmp of its own) and open to other users as a state
// directory's parents are; a directory the boxed runs may read, holding
// their scripts, a copy of qd and of this test binary (their tool); and
// one they may write.
type boxRig struct {
	mode      boxMode
	qd, db    string
	dir, open string
	out, tool string
}

func mustBoxRig(t *testing.T, mode boxMode) *boxRig {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the box tests run daemons and agents as root and as nobody")
	}
	qd, db := testkit.MustQueue(t)
	r := &boxRig{mode: mode, db: db}
	uid, gid := -1, -1
	if c := mode.daemon; c != nil {
		uid, gid = int(c.Uid), int(c.Gid)
	}
	r.dir = mustOpenDir(t, "/var/tmp", "qd-box-", 0o711, uid, gid)
	r.open = mustOpenDir(t, r.dir, "open-", 0o755, -1, -1)
	writer := uid
	if mode.user == "nobody" {
		writer = 65534
	}
	r.out = mustOpenDir(t, r.dir, "out-", 0o755, writer, writer)
	r.qd = filepath.Join(r.open, "qd")
	mustCopy(t, qd, r.qd, -1, -1)
	r.tool = filepath.Join(r.open, "e2e.test")
	mustCopy(t, os.Args[0], r.tool, -1, -1)
	return r
}

// mustOpenDir makes a directory under parent with the mode, owned by uid
// and gid unless -1, removed when the test ends.
func mustOpenDir(t *testing.T, parent, prefix string, mode os.FileMode, uid, gid int) string {
	t.Helper()
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// start starts the rig's daemon on body, as the mode's user, with env.
func (r *boxRig) start(t *testing.T, body string, env ...string) *testkit.Daemon {
	t.Helper()
	return testkit.StartDaemon(t, r.qd, r.db, "box", body, testkit.DaemonOptions{Dir: r.dir, Credential: r.mode.daemon, Env: env})
}

// script writes a shell script in the open directory.
func (r *boxRig) script(t *testing.T, name, body string) string {
	t.Helper()
	path := filepath.Join(r.open, name)
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// userLine is the agents' user setting of the mode.
func (r *boxRig) userLine() string {
	if r.mode.user == "" {
		return ""
	}
	return fmt.Sprintf("user = %q\n", r.mode.user)
}

// logsOf waits for task id to end as state and returns its run's id and
// output.
func (r *boxRig) logsOf(t *testing.T, id, state string) (shownRun, string) {
	t.Helper()
	s := waitShow(t, r.qd, r.db, id, 60*time.Second, "task "+state, func(s shown) bool { return s.Task.State == state })
	run := s.Runs[len(s.Runs)-1]
	out, _, _ := testkit.QD(t, r.qd, r.db, "logs", "--config", filepath.Join(r.dir, "qd.hcl"), "--raw", strconv.FormatInt(run.ID, 10))
	return run, out
}

// followUps lists the parent runs of the tasks in lane followups.
func (r *boxRig) followUps(t *testing.T) []int64 {
	t.Helper()
	var tasks []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(testkit.MustQD(t, r.qd, r.db, "tasks", "--lane", "followups", "--json")), &tasks); err != nil {
		t.Fatal(err)
	}
	var out []int64
	for _, task := range tasks {
		out = append(out, showTask(t, r.qd, r.db, strconv.FormatInt(task.ID, 10)).Task.ParentRun)
	}
	return out
}

// boxCheck is what a boxed run tries, each a line "WHO WHAT yes|no"; it
// runs itself again as a grandchild in a session of its own (setsid),
// which must be held to the same. $1 is who it is.
const boxCheck = `who=${1:-child}
try() { if sh -c "$2" >/dev/null 2>&1; then echo "$who $1 yes"; else echo "$who $1 no"; fi; }
[ "$who" = child ] && { read OTHER OTHERLOG; export OTHER OTHERLOG; } <<EOF
$(tr -d '"')
EOF
try etc "echo x > /etc/qd-box-$who"
try state "echo x > $STATE/qd-box-$who"
try beside "echo x > $(dirname "$QD_WORKDIR")/qd-box-$who"
try secret "cat $SECRET"
try other "ls $OTHER"
try otherlog "cat $OTHERLOG"
try config "grep -q database $CONFIG"
try workdir "echo x > $QD_WORKDIR/$who && cat $QD_WORKDIR/$who"
try write "echo x > $OUT/$who"
try tmp "echo x > /tmp/$who && cat /tmp/$who"
try enqueue "$QD enqueue --lane followups --agent nothing '{\"from\":\"$who\"}'"
try heartbeat "$QD heartbeat $QD_RUN_ID"
if [ "$who" = child ]; then
  setsid -w sh "$0" grandchild </dev/null
  echo "uid $(id -u)"
fi
`

// Ensure a sandboxed run, and a grandchild it starts in a session of its
// own, cannot create a file in /etc, in the daemon's state directory or
// beside its workdir, read a file under root's (or the daemon user's)
// home, list another run's kept workdir, read its log or read the
// daemon's config; and can write its workdir, its write path and its
// /tmp, and enqueue and heartbeat through $QD_SOCKET: as root, as root
// for user nobody, and as an unprivileged daemon (naming its own user).
func TestBox_Sandbox(t *testing.T) {
	for _, mode := range boxModes {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			r := mustBoxRig(t, mode)
			home := "/root"
			var env []string
			if mode.daemon != nil {
				home = mustOpenDir(t, r.dir, "home-", 0o700, 65534, 65534)
				env = append(env, "HOME="+home)
			}
			secret := filepath.Join(home, fmt.Sprintf("qd-box-secret-%d", time.Now().UnixNano()))
			writeFile(t, secret, "the daemon user's secret\n")
			os.Chown(secret, 65534, 65534)
			t.Cleanup(func() { os.Remove(secret) })
			check := r.script(t, "check.sh", boxCheck)
			state := filepath.Join(r.dir, "state")
			body := fmt.Sprintf(`database = "postgres://qd:secret@db.example/qd"
agent "keeper" {
  command      = ["/bin/sh", "-c", "touch $QD_WORKDIR/kept; echo kept"]
  schedule     = "@every 1s"
  lanes        = ["keeper"]
  workdir      = "fresh"
  keep_workdir = "always"
}
agent "boxed" {
  command  = ["/bin/sh", %q]
  schedule = "@every 1s"
  lanes    = ["boxed"]
  workdir  = "fresh"
  %s
  env = { QD = %q, STATE = %q, SECRET = %q, OUT = %q, CONFIG = %q }
  sandbox {
    read    = [%q]
    write   = [%q]
    network = "none"
  }
}
`, check, r.userLine(), r.qd, state, secret, r.out, filepath.Join(r.dir, "qd.hcl"), r.open, r.out)
			d := r.start(t, body, env...)
			kept, _ := r.logsOf(t, enqueue(t, r.qd, r.db, "keeper", "keeper"), "done")
			other := filepath.Join(state, "work", strconv.FormatInt(kept.ID, 10))
			if _, err := os.Stat(filepath.Join(other, "kept")); err != nil {
				t.Fatalf("the keeper's workdir is not kept: %v", err)
			}
			otherLog := filepath.Join(state, "runs", strconv.FormatInt(kept.ID, 10)+".log")
			if _, err := os.Stat(otherLog); err != nil {
				t.Fatalf("the keeper's log: %v", err)
			}
			id := testkit.MustQD(t, r.qd, r.db, "enqueue", "--lane", "boxed", "--agent", "boxed", strconv.Quote(other+" "+otherLog))
			run, out := r.logsOf(t, id, "done")
			for _, who := range []string{"child", "grandchild"} {
				for what, want := range map[string]string{"etc": "no", "state": "no", "beside": "no", "secret": "no", "other": "no",
					"otherlog": "no", "config": "no", "workdir": "yes", "write": "yes", "tmp": "yes", "enqueue": "yes", "heartbeat": "yes"} {
					if line := who + " " + what + " "; !strings.Contains(out, line+want) {
						t.Errorf("%s: %q, want %s; output:\n%s", who, line, want, out)
					}
				}
			}
			wantUID := "0"
			if mode.user == "nobody" || mode.daemon != nil {
				wantUID = "65534"
			}
			if !strings.Contains(out, "uid "+wantUID) {
				t.Errorf("the boxed child is not uid %s:\n%s", wantUID, out)
			}
			for _, f := range []string{"/etc/qd-box-child", "/etc/qd-box-grandchild", filepath.Join(state, "qd-box-child"), filepath.Join(state, "work", "qd-box-child")} {
				if _, err := os.Stat(f); err == nil {
					os.Remove(f)
					t.Errorf("a boxed run made %s", f)
				}
			}
			for _, f := range []string{"child", "grandchild"} {
				if _, err := os.Stat(filepath.Join(r.out, f)); err != nil {
					t.Errorf("what the boxed %s wrote in its write path is not there: %v", f, err)
				}
			}
			if ps := r.followUps(t); len(ps) != 2 || ps[0] != run.ID || ps[1] != run.ID {
				t.Errorf("follow-ups enqueued from the box through $QD_SOCKET record runs %v, want two of run %d", ps, run.ID)
			}
			if _, err := os.Stat(filepath.Join(state, "work", strconv.FormatInt(run.ID, 10))); err == nil {
				t.Error("the boxed run's workdir is still there")
			}
			st := d.Status(t)
			for _, a := range st.Agents {
				if a.Name == "boxed" && (a.Box == nil || a.Box.Sandbox == nil || a.Box.Sandbox.Network != "none" || !strings.Contains(a.Box.Sandbox.Enforced, "Landlock")) {
					t.Errorf("status of the boxed agent: %+v", a.Box)
				}
			}
		})
	}
}

// Ensure the network of a box: with "none" connecting to the database's
// port and to the dashboard's fails, with ["PORT"] only the database's
// port connects, and with "host" both do; as root and unprivileged.
func TestBox_Network(t *testing.T) {
	u, err := url.Parse(testkit.MustDatabaseURL(t))
	if err != nil || u.Port() == "" || !strings.HasPrefix(u.Hostname(), "127.") {
		t.Skipf("the test database %s is not on a loopback TCP port", testkit.MustDatabaseURL(t))
	}
	for _, mode := range []boxMode{boxModes[0], boxModes[2]} {
		t.Run(mode.name, func(t *testing.T) {
			t.Parallel()
			r := mustBoxRig(t, mode)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			uiAddr := ln.Addr().String()
			ln.Close()
			pg := u.Host
			script := r.script(t, "net.sh", fmt.Sprintf(`echo "pg $(%s=%s %s)"; echo "ui $(%s=%s %s)"`, dialEnv, pg, r.tool, dialEnv, uiAddr, r.tool))
			var body strings.Builder
			fmt.Fprintf(&body, "ui {\n  listen = %q\n}\n", uiAddr)
			for _, n := range []struct{ name, network string }{{"none", `"none"`}, {"ports", fmt.Sprintf(`["%s"]`, u.Port())}, {"host", `"host"`}} {
				fmt.Fprintf(&body, `agent %q {
  command  = ["/bin/sh", %q]
  schedule = "@every 1s"
  lanes    = [%q]
  sandbox {
    read    = [%q]
    network = %s
  }
}
`, n.name, script, n.name, r.open, n.network)
			}
			d := r.start(t, body.String())
			for _, c := range []struct {
				agent  string
				pg, ui bool
			}{{"none", false, false}, {"ports", true, false}, {"host", true, true}} {
				_, out := r.logsOf(t, enqueue(t, r.qd, r.db, c.agent, c.agent), "done")
				for what, want := range map[string]bool{"pg": c.pg, "ui": c.ui} {
					got := strings.Contains(out, what+" dial ok")
					if got != want {
						t.Errorf("network %s: connected to %s %v, want %v:\n%s", c.agent, what, got, want, out)
					}
				}
			}
			mustShowBoxes(t, d, "http://"+uiAddr)
		})
	}
}

// mustShowBoxes checks that qd status and the dashboard's overview show
// each agent's sandbox network as the daemon's status has it.
func mustShowBoxes(t *testing.T, d *testkit.Daemon, ui string) {
	t.Helper()
	status, _, _ := testkit.QD(t, d.Cmd.Path, "", "status", "--socket", d.Socket)
	resp, err := http.Get(ui + "/api/overview")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var overview struct {
		Agents []struct {
			Name string         `json:"name"`
			Box  *api.BoxStatus `json:"box"`
		} `json:"agents"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&overview); err != nil {
		t.Fatalf("GET /api/overview: %v", err)
	}
	for _, a := range d.Status(t).Agents {
		if a.Box == nil || a.Box.Sandbox == nil {
			t.Errorf("status of agent %s: no sandbox", a.Name)
			continue
		}
		if line := a.Name + " sandbox: network " + a.Box.Sandbox.Network; !containsCollapsed(status, line) {
			t.Errorf("qd status does not show %q:\n%s", line, status)
		}
		found := false
		for _, o := range overview.Agents {
			found = found || (o.Name == a.Name && o.Box != nil && o.Box.Text() == a.Box.Text())
		}
		if !found {
			t.Errorf("the dashboard's overview does not show agent %s's box %q: %+v", a.Name, a.Box.Text(), overview.Agents)
		}
	}
}

// Ensure a boxed child cannot move itself out of its run's cgroup (its
// write of its pid into the parent's cgroup.procs fails), nor can a run
// as nobody outside a box, and that each, with the grandchild it started
// in a session of its own, dies with its run.
func TestBox_CgroupEscape(t *testing.T) {
	r := mustBoxRig(t, boxModes[0])
	script := r.script(t, "escape.sh", `p=$(cat | tr -d '"')
setsid sleep 300 </dev/null >/dev/null 2>&1 &
echo $! > $OUT/$QD_AGENT.grandchild
echo $$ > $OUT/$QD_AGENT.child
if echo $$ > "$p/cgroup.procs" 2>/dev/null; then echo moved; else echo refused; fi
sleep 300
`)
	os.Chmod(r.out, 0o777)
	body := fmt.Sprintf(`agent "boxed" {
  command  = ["/bin/sh", %q]
  schedule = "@every 1s"
  lanes    = ["boxed"]
  timeout  = "3s"
  kill_grace = "1s"
  env      = { OUT = %q }
  sandbox {
    read  = [%q]
    write = [%q]
  }
}
agent "nobody" {
  command  = ["/bin/sh", %q]
  schedule = "@every 1s"
  lanes    = ["nobody"]
  timeout  = "3s"
  kill_grace = "1s"
  user     = "nobody"
  env      = { OUT = %q }
}
`, script, r.out, r.open, r.out, script, r.out)
	d := r.start(t, body)
	c := d.Status(t).Containment
	if c.Kind != "cgroup" {
		t.Skipf("runs are not in cgroups here: %s", c.Reason)
	}
	for _, agent := range []string{"boxed", "nobody"} {
		id := testkit.MustQD(t, r.qd, r.db, "enqueue", "--lane", agent, "--agent", agent, "--max-attempts", "1", strconv.Quote(c.Cgroup))
		_, out := r.logsOf(t, id, "failed")
		if !strings.Contains(out, "refused") {
			t.Errorf("%s: the child's move out of its cgroup: %q, want refused", agent, out)
		}
		for _, who := range []string{"child", "grandchild"} {
			pid := readPID(t, filepath.Join(r.out, agent+"."+who), 5*time.Second)
			testkit.Eventually(t, 10*time.Second, agent+"'s "+who+" to die with its run", func() bool { return !testkit.Alive(pid) })
		}
	}
}

// Ensure a fresh workdir: two runs see different empty directories, each
// removed after its run; with keep_workdir = "failed" a failed run's
// stays, qd show names it in the run's summary, and qd prune removes it
// with the run.
func TestBox_Workdir(t *testing.T) {
	qd, db := testkit.MustQueue(t)
	script := testkit.MustScript(t, t.TempDir(), "agent.sh", `echo "pwd $(pwd) $QD_WORKDIR $(ls -A | wc -l)"; touch mine; exit $(cat)`)
	d := testkit.StartDaemon(t, qd, db, "wd", fmt.Sprintf(`agent "fresh" {
  command      = [%q]
  schedule     = "@every 1s"
  workdir      = "fresh"
  keep_workdir = "failed"
}
`, script), testkit.DaemonOptions{})
	var dirs []string
	for range 2 {
		id := testkit.MustQD(t, qd, db, "enqueue", "--agent", "fresh", "0")
		s := waitShow(t, qd, db, id, 30*time.Second, "done", func(s shown) bool { return s.Task.State == "done" })
		run := s.Runs[0]
		out := testkit.MustQD(t, qd, db, "logs", "--config", d.Config, "--raw", strconv.FormatInt(run.ID, 10))
		want := filepath.Join(d.StateDir, "work", strconv.FormatInt(run.ID, 10))
		if strings.TrimSpace(out) != fmt.Sprintf("pwd %s %s 0", want, want) {
			t.Errorf("run %d: %q, want it in the empty %s, its $QD_WORKDIR", run.ID, out, want)
		}
		testkit.Eventually(t, 5*time.Second, want+" removed", func() bool { _, err := os.Stat(want); return err != nil })
		dirs = append(dirs, want)
	}
	if dirs[0] == dirs[1] {
		t.Errorf("two runs shared %s", dirs[0])
	}
	id := testkit.MustQD(t, qd, db, "enqueue", "--agent", "fresh", "--max-attempts", "1", "3")
	s := waitShow(t, qd, db, id, 30*time.Second, "failed", func(s shown) bool { return s.Task.State == "failed" })
	kept := filepath.Join(d.StateDir, "work", strconv.FormatInt(s.Runs[0].ID, 10))
	if _, err := os.Stat(filepath.Join(kept, "mine")); err != nil {
		t.Errorf("the failed run's workdir is not kept: %v", err)
	}
	if !strings.Contains(s.Runs[0].Summary, "workdir kept at "+kept) {
		t.Errorf("qd show: the failed run's summary %q does not name its kept workdir %s", s.Runs[0].Summary, kept)
	}
	show := testkit.MustQD(t, qd, db, "show", id)
	if !strings.Contains(show, "workdir kept at "+kept) {
		t.Errorf("qd show does not name the kept workdir:\n%s", show)
	}
	time.Sleep(1100 * time.Millisecond) // prune takes what finished a second ago
	testkit.MustQD(t, qd, db, "prune", "--older-than", "1s", "--config", d.Config)
	if _, err := os.Stat(kept); err == nil {
		t.Error("qd prune left the kept workdir of the run it pruned")
	}
}

// Ensure user = "nobody": the child's id -u is 65534 and its HOME that
// user's, in a workdir the user owns, and it reaches its daemon (the
// runs' socket: it may not connect to the daemon's own) to enqueue.
func TestBox_User(t *testing.T) {
	r := mustBoxRig(t, boxModes[1])
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	script := r.script(t, "who.sh", `echo "uid $(id -u) gid $(id -g) home $HOME owner $(stat -c %u .)"; $QD enqueue --lane followups --agent nothing '{}' >/dev/null 2>&1 && echo enqueued`)
	r.start(t, fmt.Sprintf(`agent "who" {
  command  = [%q]
  schedule = "@every 1s"
  user     = "nobody"
  workdir  = "fresh"
  env      = { QD = %q }
}
`, script, r.qd))
	run, out := r.logsOf(t, enqueue(t, r.qd, r.db, "default", "who"), "done")
	want := fmt.Sprintf("uid 65534 gid %s home %s owner 65534\nenqueued", nobody.Gid, nobody.HomeDir)
	if strings.TrimSpace(out) != want {
		t.Errorf("run as nobody: %q, want %q", out, want)
	}
	if ps := r.followUps(t); len(ps) != 1 || ps[0] != run.ID {
		t.Errorf("follow-ups of the run as nobody record runs %v, want [%d]", ps, run.ID)
	}
}

// Ensure what a box cannot be given is refused at its line by qd run
// --check, saying what to do: an unknown user, a write path that does not
// exist, a network of neither form, and, for a daemon that is not root,
// another user than its own.
func TestBox_Refusals(t *testing.T) {
	dir := mustOpenDir(t, "/var/tmp", "qd-check-", 0o755, -1, -1)
	qd := filepath.Join(dir, "qd")
	mustCopy(t, testkit.MustBuild(t), qd, -1, -1)
	for _, c := range []struct {
		name, body string
		as         *syscall.Credential
		want       string
	}{
		{"UnknownUser", `user = "qd-no-such-user"`, nil,
			`:4: agent "a": user "qd-no-such-user" is not a user of this host`},
		{"WriteMissing", "sandbox {\n    write = [\"/srv/qd-no-such-dir\"]\n  }", nil,
			`:5: agent "a" sandbox: write path /srv/qd-no-such-dir does not exist: a box shows only what exists; create it first, or remove it from write`},
		{"NetworkBad", "sandbox {\n    network = \"offline\"\n  }", nil,
			`:5: agent "a" sandbox: network "offline" is neither of its forms: "host" (the default), "none"`},
		{"NetworkNumber", "sandbox {\n    network = 443\n  }", nil, `:5: agent "a" sandbox: network (a number) is neither of its forms`},
		{"OtherUserNotRoot", `user = "root"`, nobodyCred,
			`:4: agent "a": user "root" (uid 0, gid 0): qd runs as uid 65534, not root, and can start runs only as itself; run qd as root, or remove user`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.as != nil && os.Geteuid() != 0 {
				t.Skip("needs root, to check as nobody")
			}
			path := filepath.Join(dir, c.name+".hcl")
			writeFile(t, path, "agent \"a\" {\n  command  = [\"/bin/true\"]\n  schedule = \"@hourly\"\n  "+c.body+"\n}\n")
			cmd := exec.Command(qd, "run", "--check", "--config", path)
			cmd.Env = append(testkit.Environ(), "HOME="+dir, "XDG_STATE_HOME="+dir)
			if c.as != nil {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.as}
			}
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), path+c.want) {
				t.Errorf("qd run --check: %v\n%s\nwant it to say %s%s", err, out, path, c.want)
			}
		})
	}
}

// containsCollapsed reports whether out holds want when runs of spaces
// count as one: a table's columns may be of any width.
func containsCollapsed(out, want string) bool {
	collapse := func(s string) string { return strings.Join(strings.Fields(s), " ") }
	return strings.Contains(collapse(out), collapse(want))
}
