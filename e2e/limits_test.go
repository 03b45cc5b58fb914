package e2e

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure a daemon started with few open files says in qd status that they
// cap its children, with about how many it can hold, and that the figure
// is near what it really starts: each child holds a few of its files.
func TestLimits_OpenFilesCapStarts(t *testing.T) {
	t.Parallel()
	qd, db := testkit.MustQueue(t)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	d := testkit.StartDaemon(t, qd, db, "capped", fmt.Sprintf(`
agent "sleeper" {
  command  = [%q, "600"]
  schedule = "@every 1s"
  parallel = 400
  kill_grace = "1s"
}`, sleep), testkit.DaemonOptions{Prefix: []string{"prlimit", "--nofile=256:256", "--"}})
	st := d.Status(t)
	if len(st.StartCaps) != 1 || st.StartCaps[0].Limit != "RLIMIT_NOFILE" || st.StartCaps[0].Value != 256 {
		t.Fatalf("start caps %+v, want RLIMIT_NOFILE at 256", st.StartCaps)
	}
	est := st.StartCaps[0].Children
	if est < 10 || est > 50 {
		t.Errorf("RLIMIT_NOFILE 256 allows about %d children, want a few dozen", est)
	}
	out := testkit.MustQD(t, qd, db, "status", "--socket", d.Socket)
	if want := fmt.Sprintf("starts capped by RLIMIT_NOFILE (256): about %d children", est); !strings.Contains(out, want) {
		t.Errorf("qd status does not say %q:\n%s", want, out)
	}
	for i := range 100 {
		testkit.MustQD(t, qd, db, "enqueue", "--lane", fmt.Sprintf("c%03d", i), "--agent", "sleeper", "{}")
	}
	// The daemon starts what its files allow, and holds the rest back.
	most := 0
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		most = max(most, len(d.Status(t).Runs))
	}
	if most < est*7/10 || most > est*13/10+5 {
		t.Errorf("the daemon held at most %d children; qd status said about %d", most, est)
	}
	t.Logf("estimate %d children, held %d", est, most)
}
