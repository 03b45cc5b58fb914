package faults

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/pg"
)

// floorMigration is the migration that made schemas record their floor:
// the qd of the commit before it is built for the version below it, and
// may run on a schema at that version, as its floor line says.
const floorMigration = "pg/migrations/017_schema_floor.sql"

// mustBinaryBefore builds the qd of the commit before the one that added
// path, from the repository's history, and returns it. It skips the test
// when the history is not there to build it from (a shallow clone).
func mustBinaryBefore(t *testing.T, path string) string {
	t.Helper()
	root := testkit.Root()
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	added, err := git("log", "--format=%H", "--diff-filter=A", "-1", "--", path)
	if err != nil || added == "" {
		t.Skipf("no commit in this checkout's history adds %s (git: %v); a qd built before it cannot be made", path, err)
	}
	parent, err := git("rev-parse", "--verify", "-q", added+"^")
	if err != nil {
		t.Skipf("the commit before %s is not in this checkout's history (a shallow clone?)", added)
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive %s | tar -x -C %s", parent, src))
	archive.Dir = root
	if out, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("git archive %s: %v\n%s", parent, err, out)
	}
	bin := filepath.Join(t.TempDir(), "qd-"+parent[:10])
	build := exec.Command("go", "build", "-o", bin, "./cmd/qd")
	build.Dir = src
	build.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build qd at %s: %v\n%s", parent, err, out)
	}
	t.Logf("built qd of commit %s, before the schema recorded floors", parent[:10])
	return bin
}

// Ensure a qd built before the schema's latest version runs beside
// today's on a schema that today's migrated, when the versions past its
// own declare it compatible: tasks shared between an old and a new
// daemon all end done, once each, within their lanes' limits. Then, once
// a newer version that is not compatible is recorded, today's qd refuses
// to start, to migrate and to list, naming both versions, instead of
// running on blind.
func TestVersions_SideBySide(t *testing.T) {
	t.Parallel()
	old := mustBinaryBefore(t, floorMigration)
	r := newRig(t)
	var ids []int64
	for i := range 30 {
		ids = append(ids, r.enqueue(fmt.Sprintf("mixed%d", i%3), "w", `{"mode":"sleep","ms":100}`, 3))
	}
	// Lane mixed0 is the old daemon's alone, mixed2 the new one's, and
	// both take mixed1: each must run tasks, and they share a lane.
	body := "shutdown_grace = \"5s\"\n" + r.agentHCL(agentConf{name: "w", lanes: []string{"mixed0", "mixed1"}, parallel: 2})
	testkit.StartDaemon(t, old, r.url, "old", body, testkit.DaemonOptions{})
	r.daemon("new", r.agentHCL(agentConf{name: "w", lanes: []string{"mixed1", "mixed2"}, parallel: 2}), testkit.DaemonOptions{})
	fig.fault("mixed-versions", 1)
	r.verify(expect{})
	var owners int
	r.scalar(&owners, `SELECT count(DISTINCT owner) FROM {s}.runs`)
	if owners != 2 {
		t.Errorf("runs by %d of the 2 daemons, want both: the old one must have run tasks too", owners)
	}
	var runs int
	r.scalar(&runs, `SELECT count(*) FROM {s}.runs`)
	if runs != len(ids) {
		t.Errorf("%d runs for %d tasks, want one each", runs, len(ids))
	}

	next := pg.LatestVersion() + 1
	r.exec(r.expand(`INSERT INTO {s}.schema_migrations (version, name, floor) VALUES ($1, 'future.sql', $1)`), next)
	fig.fault("mixed-versions", 1)
	want := fmt.Sprintf("is at version %d and needs a qd built for version %d or later; this qd is built for version %d", next, next, pg.LatestVersion())
	d := r.daemon("newest", r.agentHCL(agentConf{name: "w"}), testkit.DaemonOptions{NoWait: true})
	if code := d.Wait(t, 20*time.Second); code == 0 {
		t.Errorf("qd run on a schema newer than it exited 0")
	}
	if !strings.Contains(d.Log(), want) {
		t.Errorf("qd run on a newer schema does not say %q:\n%s", want, d.Log())
	}
	for _, args := range [][]string{{"migrate"}, {"tasks"}} {
		out, errOut, code := testkit.QD(t, r.qd, r.url, args...)
		if code != 1 || !strings.Contains(errOut, want) {
			t.Errorf("qd %s on a newer schema: exit %d, stderr %q, stdout %q; want exit 1 saying %q", args[0], code, errOut, out, want)
		}
	}
}
