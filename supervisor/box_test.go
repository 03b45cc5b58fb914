package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/box"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/lease/memlease"
)

// mustOpenScript writes an executable shell script in a directory any
// user may enter, outside /tmp (a box has its own), and returns its path.
func mustOpenScript(t *testing.T, body string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "qd-sup-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// mustOpenState lets any user through the harness's state directory's
// parents, as a daemon's state directory would be placed.
func mustOpenState(t *testing.T, h *harness) {
	t.Helper()
	for d := filepath.Dir(h.state); d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			os.Chmod(d, fi.Mode().Perm()|0o011)
		}
	}
}

// runScript starts script for a task of its own and waits for its end.
func (h *harness) runScript(script string, spec Spec) (lease.Run, string) {
	h.t.Helper()
	if spec.Lease == 0 {
		spec.Lease = 30e9
	}
	l := h.claim("{}", spec.Lease)
	spec.Agent, spec.Command = "agent", []string{script}
	if err := h.s.Start(l, spec); err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	r := h.waitRun(l.RunID)
	h.waitGone()
	out, _ := os.ReadFile(LogPath(h.state, l.RunID))
	return r, string(out)
}

// Ensure a fresh workdir: two runs each start in an empty directory of
// their own, $QD_WORKDIR, removed when they end; with keep_workdir
// "failed" a failed run's stays and its summary names it, and a
// completed run's goes.
func TestSupervisor_Workdir(t *testing.T) {
	h := MustHarness(t, nil)
	script := MustScript(t, `pwd; echo "env $QD_WORKDIR"; ls -A | wc -l; touch mine; exit $(cat)`)
	var dirs []string
	for range 2 {
		l := h.claim("0", 30e9)
		if err := h.s.Start(l, Spec{Agent: "agent", Command: []string{script}, Lease: 30e9, Workdir: true}); err != nil {
			t.Fatal(err)
		}
		r := h.waitRun(l.RunID)
		out, _ := os.ReadFile(LogPath(h.state, l.RunID))
		lines := strings.Fields(string(out))
		want := WorkPath(h.state, l.RunID)
		if r.State != lease.RunCompleted || len(lines) != 4 || lines[0] != want || lines[2] != want || lines[3] != "0" {
			t.Fatalf("run %d: %s, output %q; want it in an empty %s", l.RunID, r.State, out, want)
		}
		dirs = append(dirs, lines[0])
	}
	h.waitGone()
	if dirs[0] == dirs[1] {
		t.Errorf("two runs shared the workdir %s", dirs[0])
	}
	for _, d := range dirs {
		if _, err := os.Stat(d); err == nil {
			t.Errorf("workdir %s is still there after its run", d)
		}
	}
	for _, c := range []struct {
		exit string
		kept bool
	}{{"1", true}, {"0", false}} {
		l := h.claim(c.exit, 30e9)
		if err := h.s.Start(l, Spec{Agent: "agent", Command: []string{script}, Lease: 30e9, Workdir: true, KeepWorkdir: KeepFailed}); err != nil {
			t.Fatal(err)
		}
		r := h.waitRun(l.RunID)
		h.waitGone()
		dir := WorkPath(h.state, l.RunID)
		_, err := os.Stat(filepath.Join(dir, "mine"))
		if kept := err == nil; kept != c.kept {
			t.Errorf("exit %s with keep_workdir failed: workdir kept %v, want %v", c.exit, kept, c.kept)
		}
		if named := strings.Contains(r.Summary, "workdir kept at "+dir); named != c.kept {
			t.Errorf("exit %s: summary %q, naming the kept workdir %v, want %v", c.exit, r.Summary, named, c.kept)
		}
	}
}

// Ensure a run as user nobody has that user's uid, gid and HOME, in a
// workdir nobody owns.
func TestSupervisor_User(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a child as another user")
	}
	h := MustHarness(t, nil)
	mustOpenState(t, h)
	u := &Credential{Name: "nobody", UID: 65534, GID: 65534, Home: "/nonexistent"}
	r, out := h.runScript(mustOpenScript(t, `id -u; id -g; echo "$HOME $USER"; stat -c %u .`), Spec{User: u, Workdir: true})
	if got, want := strings.Fields(out), []string{"65534", "65534", "/nonexistent", "nobody", "65534"}; r.State != lease.RunCompleted || strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("run as nobody: %s (%s), output %q, want %q", r.State, r.Summary, out, want)
	}
}

// Ensure a boxed run writes its workdir and no more, and that a box the
// shim cannot make fails the run with the reason in its summary, without
// the program having run.
func TestSupervisor_Box(t *testing.T) {
	if s := box.Probe(selfExe); s.Reason != "" {
		t.Skip(s.Reason)
	}
	h := MustHarness(t, nil)
	script := mustOpenScript(t, `touch $QD_WORKDIR/ok && echo wrote; touch /etc/qd-box-test 2>/dev/null || echo refused; echo ran > `+filepath.Dir(h.state)+`/ran`)
	r, out := h.runScript(script, Spec{Workdir: true, Box: &box.Spec{Net: box.NetNone}})
	if r.State != lease.RunCompleted || strings.Fields(out)[0] != "wrote" || !strings.Contains(out, "refused") {
		t.Errorf("boxed run: %s (%s), output %q", r.State, r.Summary, out)
	}
	if _, err := os.Stat("/etc/qd-box-test"); err == nil {
		os.Remove("/etc/qd-box-test")
		t.Error("a boxed run wrote in /etc")
	}
	missing := filepath.Join(h.state, "missing")
	l := h.claim("{}", 30e9)
	err := h.s.Start(l, Spec{Agent: "agent", Command: []string{script}, Lease: 30e9, Box: &box.Spec{Net: box.NetHost, Read: []string{missing}}})
	var be *box.Error
	if !errors.As(err, &be) {
		t.Errorf("Start of a run whose box cannot be made: %v, want a box.Error", err)
	}
	r = h.waitRun(l.RunID)
	if r.State != lease.RunFailed || !strings.Contains(r.Summary, "box: ") || !strings.Contains(r.Summary, missing) {
		t.Errorf("run whose box cannot be made: %s, summary %q; want failed, naming the box and %s", r.State, r.Summary, missing)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(h.state), "ran")); err == nil {
		t.Error("the program ran, though its box could not be made")
	}
}

// BenchmarkStart measures one Start, from the call until the agent's
// program runs (/bin/true): plainly, in a box with the host's network, in
// a box with none, as the shim of a qd binary when QD_BENCH_SHIM names one
// (else this test binary serves as the shim). go test -bench Start -run ^$
func BenchmarkStart(b *testing.B) {
	mem := memlease.New()
	s, err := New(Config{Provider: mem, StateDir: b.TempDir(), Logger: hclog.NewNullLogger(), Owner: "bench", Instance: "i1",
		Shim: os.Getenv("QD_BENCH_SHIM")})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Loop(ctx)
	for _, c := range []struct {
		name string
		box  *box.Spec
	}{{"Plain", nil}, {"BoxHost", &box.Spec{Net: box.NetHost}}, {"BoxNone", &box.Spec{Net: box.NetNone}}} {
		b.Run(c.name, func(b *testing.B) {
			if c.box != nil && s.BoxSupport().Reason != "" {
				b.Skip(s.BoxSupport().Reason)
			}
			for b.Loop() {
				b.StopTimer()
				if _, _, err := mem.Enqueue(ctx, lease.EnqueueParams{Agent: "agent"}); err != nil {
					b.Fatal(err)
				}
				l, err := mem.Claim(ctx, lease.ClaimParams{Owner: "bench", Instance: "i1", Lease: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := s.Start(l, Spec{Agent: "agent", Command: []string{"/bin/true"}, Lease: time.Minute, Box: c.box}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				for len(s.Snapshot()) > 0 {
					time.Sleep(time.Millisecond)
				}
				b.StartTimer()
			}
		})
	}
}
