package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a plain restart of the database server (qd db stop, qd db start
// on the private cluster) holds no claims, and that the daemon's log says
// the server restarted: a task enqueued after it runs at once, where the
// hold after a failover would keep it waiting two heartbeats of the
// agent, 41 s here. Then ensure a copy of the cluster restored behind
// what the daemon saw (same cluster, same timeline, its write-ahead log
// behind) is still taken for a changed server: claims are held, and qd
// status says why.
func TestDatabase_RestartIsNoFailover(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to copy the private cluster's data of its user qd")
	}
	t.Parallel()
	qd := testkit.MustBuild(t)
	work := mustQuickstartDir(t, -1, -1)
	agent := filepath.Join(work, "ok.sh")
	writeFile(t, agent, "#!/bin/sh\necho done\n")
	if err := os.Chmod(agent, 0o755); err != nil {
		t.Fatal(err)
	}
	d := testkit.StartDaemon(t, qd, "", "restarted", `agent "ok" {
  command  = ["`+agent+`"]
  schedule = "@every 1s"
  lease    = "60s"
}`, testkit.DaemonOptions{Dir: work})
	cli := func(args ...string) string {
		t.Helper()
		out, errOut, code := testkit.QD(t, qd, "", append(args, "--config", d.Config)...)
		if code != 0 {
			t.Fatalf("qd %s: exit %d: %s", strings.Join(args, " "), code, errOut)
		}
		return strings.TrimSpace(out)
	}
	done := func(what string) {
		t.Helper()
		id := cli("enqueue", "--agent", "ok", "--lane", "r")
		start := time.Now()
		testkit.Eventually(t, 15*time.Second, what, func() bool {
			return strings.Contains(cli("show", id, "--json"), `"state": "done"`)
		})
		t.Logf("%s: done %s after its enqueue", what, time.Since(start).Round(time.Millisecond))
	}
	done("the first task")
	cli("db", "stop")
	cli("db", "start")
	done("a task enqueued after a restart of the server")
	if db := d.Status(t).Database; !db.ServerChangedAt.IsZero() {
		t.Errorf("a restart was taken for a change of server: %+v", db)
	}
	d.WaitLog(t, "the database server restarted", 10*time.Second)
	if strings.Contains(d.Log(), "claims held") {
		t.Errorf("the daemon held claims after a plain restart:\n%s", d.Log())
	}

	data := filepath.Join(work, "state", "pg", "data")
	cli("db", "stop")
	if out, err := exec.Command("cp", "-a", data, data+".behind").CombinedOutput(); err != nil {
		t.Fatalf("copy the cluster: %v\n%s", err, out)
	}
	cli("db", "start")
	done("a task the copy will not know")
	time.Sleep(2 * time.Second) // a transaction or two reads the WAL position past the copy
	cli("db", "stop")
	if err := os.RemoveAll(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(data+".behind", data); err != nil {
		t.Fatal(err)
	}
	cli("db", "start")
	cli("enqueue", "--agent", "ok", "--lane", "r")
	testkit.Eventually(t, 20*time.Second, "claims held after the copy behind came back", func() bool {
		db := d.Status(t).Database
		return !db.ServerChangedAt.IsZero() && strings.Contains(db.ServerChange, "behind") && db.ClaimsHeldUntil.After(time.Now())
	})
	d.WaitLog(t, "claims held", 5*time.Second)
}
