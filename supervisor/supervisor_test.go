package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/qd-run/qd/lease"
)

func TestSupervisor_Start(t *testing.T) {
	t.Run("Payload", func(t *testing.T) {
		// Ensure the payload reaches the child's stdin byte for byte, even
		// when it is larger than a pipe buffer.
		t.Parallel()
		h := MustHarness(t, nil)
		out := filepath.Join(t.TempDir(), "stdin")
		payload := `{"text": "héllo\tworld  ", "n": [1, 2.50, -0], "pad": "` + strings.Repeat("z", 200<<10) + `"}`
		l := h.start("cat > "+out, payload, Spec{})
		if got, want := h.waitRun(l.RunID).State, lease.RunCompleted; got != want {
			t.Fatalf("state = %s, want %s", got, want)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != payload {
			t.Fatalf("stdin got %d bytes, want the %d-byte payload exactly", len(got), len(payload))
		}
	})

	t.Run("PayloadNotRead", func(t *testing.T) {
		// Ensure a child that never reads a large payload still ends and
		// settles.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("echo ignored", `"`+strings.Repeat("y", 900<<10)+`"`, Spec{})
		if got, want := h.waitRun(l.RunID).Summary, "ignored"; got != want {
			t.Fatalf("summary = %q, want %q", got, want)
		}
	})

	t.Run("LogFile", func(t *testing.T) {
		// Ensure stdout and stderr both land in the run's private log file.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("echo to-out; echo to-err >&2", "{}", Spec{})
		h.waitRun(l.RunID)
		path := LogPath(h.state, l.RunID)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), "to-out") || !strings.Contains(string(b), "to-err") {
			t.Fatalf("log = %q, want both streams", b)
		}
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fi.Mode().Perm(), os.FileMode(0o600); got != want {
			t.Fatalf("log mode = %v, want %v", got, want)
		}
	})

	t.Run("MissingProgram", func(t *testing.T) {
		// Ensure a missing program fails the attempt with a summary naming
		// the path and the errno.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.claim("{}", time.Minute)
		err := h.s.Start(l, Spec{Agent: "agent", Command: []string{"/nonexistent/agent"}})
		if err == nil {
			t.Fatal("Start succeeded, want an error")
		}
		r := h.waitRun(l.RunID)
		if got, want := r.State, lease.RunFailed; got != want {
			t.Fatalf("state = %s, want %s", got, want)
		}
		for _, want := range []string{"/nonexistent/agent", "ENOENT"} {
			if !strings.Contains(r.Summary, want) {
				t.Errorf("summary = %q, want it to contain %q", r.Summary, want)
			}
		}
	})

	t.Run("NotExecutable", func(t *testing.T) {
		// Ensure a program without the execute bit fails with EACCES.
		t.Parallel()
		h := MustHarness(t, nil)
		path := filepath.Join(t.TempDir(), "agent")
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		l := h.claim("{}", time.Minute)
		if err := h.s.Start(l, Spec{Agent: "agent", Command: []string{path}}); err == nil {
			t.Fatal("Start succeeded, want an error")
		}
		if r := h.waitRun(l.RunID); !strings.Contains(r.Summary, "EACCES") || !strings.Contains(r.Summary, path) {
			t.Fatalf("summary = %q, want the path and EACCES", r.Summary)
		}
	})
}

func TestSupervisor_Env(t *testing.T) {
	// Ensure the child sees only the allowlisted daemon variables, the
	// agent's env and the QD_ variables: no secrets, no systemd sockets.
	t.Setenv("QD_TEST_CANARY", "leak")
	t.Setenv("PGPASSWORD", "secret")
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("QD_DATABASE_URL", "postgres://u:secret@db/x")
	t.Setenv("LC_ALL", "C")
	h := MustHarness(t, nil)
	out := filepath.Join(t.TempDir(), "env")
	l := h.start("env > "+out, "{}", Spec{Env: map[string]string{"AGENT_SETTING": "on", "QD_RUN_ID": "spoofed"}})
	h.waitRun(l.RunID)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			env[k] = v
		}
	}
	for _, k := range []string{"QD_TEST_CANARY", "PGPASSWORD", "NOTIFY_SOCKET", "QD_DATABASE_URL"} {
		if v, ok := env[k]; ok {
			t.Errorf("child sees %s=%q, want it absent", k, v)
		}
	}
	want := map[string]string{
		"QD_TASK_ID": strconv.FormatInt(l.TaskID, 10), "QD_RUN_ID": strconv.FormatInt(l.RunID, 10),
		"QD_LANE": l.Lane, "QD_AGENT": "agent", "QD_ATTEMPT": "1", "QD_MAX_ATTEMPTS": "3",
		"AGENT_SETTING": "on", "LC_ALL": "C", "PATH": os.Getenv("PATH"),
	}
	for k, v := range want {
		if got := env[k]; got != v {
			t.Errorf("child sees %s=%q, want %q", k, got, v)
		}
	}
}

func TestSupervisor_Outcome(t *testing.T) {
	// Ensure exit 0, a non-zero exit and death by signal map to completed,
	// failed and abandoned, with the summary saying which, and that no
	// child is left a zombie.
	h := MustHarness(t, nil)
	tests := []struct {
		name, body string
		state      lease.RunState
		task       lease.TaskState
		code       int // -1: none
		signal     string
		summary    string
	}{
		{"Exit0", "echo first; echo; echo '  all good  '; echo", lease.RunCompleted, lease.TaskDone, 0, "", "all good"},
		{"Exit3", "echo broke; exit 3", lease.RunFailed, lease.TaskQueued, 3, "", "exited 3: broke"},
		{"Signal", "echo dying; kill -SEGV $$", lease.RunAbandoned, lease.TaskQueued, -1, "SIGSEGV", "killed by SIGSEGV: dying"},
		{"StderrFirst", "echo 'working on it'; echo 'upstream returned 503' >&2; echo 'cleaning up'; exit 1", lease.RunFailed, lease.TaskQueued, 1, "", "exited 1: upstream returned 503"},
		{"CompletedKeepsStdout", "echo 'a warning' >&2; echo 'built 3 files'", lease.RunCompleted, lease.TaskDone, 0, "", "built 3 files"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := h.start(tt.body, "{}", Spec{RetryBackoff: time.Hour})
			r := h.waitRun(l.RunID)
			if r.State != tt.state || r.Signal != tt.signal || r.Summary != tt.summary {
				t.Fatalf("run = %s/%q/%q, want %s/%q/%q", r.State, r.Signal, r.Summary, tt.state, tt.signal, tt.summary)
			}
			if got := r.ExitCode; (got == nil) != (tt.code < 0) || (got != nil && *got != tt.code) {
				t.Fatalf("exit code = %v, want %d", got, tt.code)
			}
			if got := h.task(l.TaskID).State; got != tt.task {
				t.Fatalf("task state = %s, want %s", got, tt.task)
			}
		})
	}
	h.waitGone()
	if z := zombies(t); len(z) > 0 {
		t.Fatalf("zombie children: %v", z)
	}
}

func TestSupervisor_Output(t *testing.T) {
	t.Run("Large", func(t *testing.T) {
		// Ensure 50 MB of output is read to the end into the log while
		// the tail and summary stay bounded.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("yes 'some output line' | head -c 52428800; echo; echo the end", "{}", Spec{})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted || r.Summary != "the end" {
			t.Fatalf("run = %s %q, want completed \"the end\"", r.State, r.Summary)
		}
		if len(r.OutputTail) > tailSize || !strings.HasSuffix(r.OutputTail, "the end\n") {
			t.Fatalf("tail is %d bytes ending %q, want at most %d ending with the last line",
				len(r.OutputTail), r.OutputTail[max(0, len(r.OutputTail)-20):], tailSize)
		}
		fi, err := os.Stat(LogPath(h.state, l.RunID))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := fi.Size(), int64(52428800+len("\nthe end\n")); got != want {
			t.Fatalf("log holds %d bytes, want %d", got, want)
		}
	})

	t.Run("LogCapped", func(t *testing.T) {
		// Ensure output past MaxLogBytes is still drained (the child ends
		// normally and the tail has its last line) but the log file stops
		// growing, with a note saying so.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("head -c 83886080 /dev/zero; echo; echo last words", "{}", Spec{})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted || !strings.HasSuffix(r.OutputTail, "last words\n") {
			t.Fatalf("run = %s, tail ends %q; want completed with the last line", r.State, r.OutputTail[max(0, len(r.OutputTail)-20):])
		}
		b, err := os.ReadFile(LogPath(h.state, l.RunID))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(b), MaxLogBytes+len(truncatedNote); got != want || !strings.HasSuffix(string(b), truncatedNote) {
			t.Fatalf("log holds %d bytes, want %d ending with the truncation note", got, want)
		}
	})

	t.Run("EndlessLine", func(t *testing.T) {
		// Ensure a 10 MB line without a newline neither blocks the child
		// nor grows the summary.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("head -c 10485760 /dev/zero | tr '\\0' x", "{}", Spec{})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted {
			t.Fatalf("state = %s, want completed", r.State)
		}
		if want := strings.Repeat("x", lineMax) + "…"; r.Summary != want {
			t.Fatalf("summary is %d bytes, want %d x's and an ellipsis", len(r.Summary), lineMax)
		}
		if got := len(r.OutputTail); got != tailSize {
			t.Fatalf("tail is %d bytes, want %d", got, tailSize)
		}
	})

	t.Run("GrandchildHoldsPipe", func(t *testing.T) {
		// Ensure a child that exits 0 while a grandchild keeps its stdout
		// open completes anyway, and the grandchild is killed with it.
		t.Parallel()
		h := MustHarness(t, nil)
		pidFile := filepath.Join(t.TempDir(), "gc")
		l := h.start("sleep 300 & echo $! > "+pidFile+"; echo finished", "{}", Spec{})
		gc := MustReadPID(t, pidFile)
		r := h.waitRun(l.RunID)
		if r.State != lease.RunCompleted || r.Summary != "finished" {
			t.Fatalf("run = %s %q, want completed \"finished\"", r.State, r.Summary)
		}
		MustDie(t, gc, "grandchild")
	})
}

func TestSupervisor_Timeout(t *testing.T) {
	t.Run("KillsGrandchild", func(t *testing.T) {
		// Ensure a timeout abandons the run and kills the whole group,
		// including a grandchild that ignores SIGTERM.
		t.Parallel()
		h := MustHarness(t, nil)
		pidFile := filepath.Join(t.TempDir(), "gc")
		l := h.start("(trap '' TERM; sleep 300) & echo $! > "+pidFile+"; sleep 300", "{}",
			Spec{Timeout: time.Second, KillGrace: time.Second})
		gc := MustReadPID(t, pidFile)
		r := h.waitRun(l.RunID)
		if r.State != lease.RunAbandoned || r.Summary != "timed out after 1s" {
			t.Fatalf("run = %s %q, want abandoned \"timed out after 1s\"", r.State, r.Summary)
		}
		MustDie(t, gc, "grandchild")
	})

	t.Run("Stall", func(t *testing.T) {
		// Ensure a child that goes quiet for StallTimeout is abandoned as
		// stalled.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("echo hello; sleep 300", "{}", Spec{StallTimeout: time.Second, KillGrace: time.Second})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunAbandoned || r.Summary != "stalled: no output for 1s; last output: hello" {
			t.Fatalf("run = %s %q, want abandoned, stalled, with its last output", r.State, r.Summary)
		}
	})

	t.Run("PIDRecordedSoon", func(t *testing.T) {
		// Ensure a run's pid is in the queue within about a second of its
		// start, not only after its first heartbeat interval.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("sleep 30", "{}", Spec{Lease: time.Minute, Heartbeat: 20 * time.Second})
		deadline := time.Now().Add(3 * time.Second)
		for {
			r, err := h.mem.Run(context.Background(), l.RunID)
			if err != nil {
				t.Fatal(err)
			}
			if r.PID > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("run %d has no pid 3 s after its start (heartbeat every 20 s)", l.RunID)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})

	t.Run("StallQuotesWhatCameBefore", func(t *testing.T) {
		// Ensure the stall's summary quotes the last line the agent wrote
		// before it was stopped, not what it says in answer to SIGTERM.
		t.Parallel()
		h := MustHarness(t, nil)
		l := h.start("trap 'echo caught TERM, leaving >&2; exit 1' TERM; echo on step 3; sleep 300 & wait", "{}",
			Spec{StallTimeout: time.Second, KillGrace: 2 * time.Second})
		r := h.waitRun(l.RunID)
		if r.State != lease.RunAbandoned || r.Summary != "stalled: no output for 1s; last output: on step 3" {
			t.Fatalf("run = %s %q, want abandoned, stalled, quoting the line before the stop", r.State, r.Summary)
		}
		if !strings.Contains(r.OutputTail, "caught TERM") {
			t.Errorf("output tail %q lacks the agent's answer to SIGTERM, which it still keeps", r.OutputTail)
		}
	})

	t.Run("BacksOff", func(t *testing.T) {
		// Ensure the next attempt after a timeout, a stall or a death by a
		// signal qd did not send waits retry_backoff, as after a failure,
		// while one after qd's own stop (shutdown) is claimable at once.
		t.Parallel()
		h := MustHarness(t, nil)
		const backoff = time.Hour
		for _, tt := range []struct {
			name, body string
			spec       Spec
		}{
			{"timeout", "sleep 300", Spec{Timeout: 500 * time.Millisecond, KillGrace: time.Second, RetryBackoff: backoff}},
			{"stall", "sleep 300", Spec{StallTimeout: 500 * time.Millisecond, KillGrace: time.Second, RetryBackoff: backoff}},
			{"signal", "kill -SEGV $$", Spec{RetryBackoff: backoff}},
		} {
			l := h.start(tt.body, "{}", tt.spec)
			if r := h.waitRun(l.RunID); r.State != lease.RunAbandoned {
				t.Errorf("%s: run %s %q, want abandoned", tt.name, r.State, r.Summary)
			}
			if task := h.task(l.TaskID); task.State != lease.TaskQueued || time.Until(task.RunAfter) < backoff/2 {
				t.Errorf("%s: task %s, next attempt in %s; want queued, about %s from now", tt.name, task.State, time.Until(task.RunAfter).Round(time.Second), backoff)
			}
		}
	})
}

func TestSupervisor_Snapshot(t *testing.T) {
	// Ensure a live run shows up with its pid, last output and lease, and
	// the agent's running count follows it.
	t.Parallel()
	h := MustHarness(t, nil)
	l := h.start("echo started; sleep 2", "{}", Spec{Lease: 30 * time.Second})
	var st RunStatus
	deadline := time.Now().Add(10 * time.Second)
	for st.LastOutputAt.IsZero() && time.Now().Before(deadline) {
		if snap := h.s.Snapshot(); len(snap) == 1 {
			st = snap[0]
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st.RunID != l.RunID || st.TaskID != l.TaskID || st.Agent != "agent" || st.PID <= 0 || st.Attempt != 1 {
		t.Fatalf("snapshot = %+v, want run %d with a pid", st, l.RunID)
	}
	if st.LastOutputAt.IsZero() || st.LeaseLeft <= 0 || st.LeaseLeft > 30*time.Second {
		t.Fatalf("snapshot = %+v, want last output and lease left", st)
	}
	if got := h.s.Running("agent"); got != 1 {
		t.Fatalf("Running = %d, want 1", got)
	}
	h.waitRun(l.RunID)
	h.waitGone()
	if got := h.s.Running("agent"); got != 0 {
		t.Fatalf("Running = %d after the run ended, want 0", got)
	}
}

func TestSupervisor_Start_AfterDrain(t *testing.T) {
	// Ensure Start refuses new work once Drain began, and releases the
	// claimed run at once with its attempt refunded.
	t.Parallel()
	h := MustHarness(t, nil)
	h.s.Drain(0, nil)
	l := h.claim("{}", time.Minute)
	err := h.s.Start(l, Spec{Agent: "agent", Command: []string{"/bin/true"}})
	if !errors.Is(err, ErrShuttingDown) {
		t.Fatalf("Start = %v, want ErrShuttingDown", err)
	}
	r := h.waitRun(l.RunID)
	if r.State != lease.RunAbandoned || r.Summary != "supervisor shutdown" {
		t.Fatalf("run = %s %q, want abandoned \"supervisor shutdown\"", r.State, r.Summary)
	}
	if task := h.task(l.TaskID); task.State != lease.TaskQueued || task.Attempts != 0 {
		t.Fatalf("task = %s after %d attempts, want queued with the attempt refunded", task.State, task.Attempts)
	}
}

func TestSupervisor_ManyRuns(t *testing.T) {
	// Ensure a few hundred short runs leave no file descriptors, goroutines,
	// zombies or records behind.
	h := MustHarness(t, nil)
	h.start("exit 0", "{}", Spec{}) // warm up the spawner and the loop
	h.waitGone()
	fds, goroutines := openFDs(t), runtime.NumGoroutine()
	var ls []*lease.Lease
	for range 300 {
		ls = append(ls, h.start("echo ok", "{}", Spec{}))
	}
	for _, l := range ls {
		if r := h.waitRun(l.RunID); r.State != lease.RunCompleted {
			t.Fatalf("run %d = %s, want completed", l.RunID, r.State)
		}
	}
	h.waitGone()
	for i := 0; i < 100 && h.dones.Load() < 301; i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if got, want := h.dones.Load(), int64(301); got != want {
		t.Errorf("OnDone called %d times, want once per run (%d)", got, want)
	}
	time.Sleep(100 * time.Millisecond)
	// Each idle cgroup slot keeps three descriptors open; there are at
	// most as many as runs were live at once.
	idle := h.s.idleSlots()
	if got := openFDs(t); got > fds+5+3*idle {
		t.Errorf("open fds %d -> %d after 300 runs (%d idle cgroup slots)", fds, got, idle)
	}
	if got := runtime.NumGoroutine(); got > goroutines+5 {
		t.Errorf("goroutines %d -> %d after 300 runs", goroutines, got)
	}
	if z := zombies(t); len(z) > 0 {
		t.Errorf("zombie children: %v", z)
	}
	if ents, _ := os.ReadDir(childrenDir(h.state)); len(ents) != 0 {
		t.Errorf("%d child records left, want none", len(ents))
	}
}

func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/dev/fd")
	if err != nil {
		t.Skip("cannot count open files here")
	}
	return len(ents)
}

// Ensure a lease whose claim answered after the run's local deadline (the
// claim waited on a lock) is given back unstarted: no child runs, the run
// is abandoned with a summary that says why, and the attempt is refunded.
func TestSupervisor_StartLateClaim(t *testing.T) {
	t.Parallel()
	h := MustHarness(t, nil)
	marker := filepath.Join(t.TempDir(), "ran")
	l := h.claim("{}", 4*time.Second)
	spec := Spec{Agent: "agent", Command: []string{MustScript(t, "touch "+marker)},
		Lease: 4 * time.Second, Claimed: time.Now().Add(-3500 * time.Millisecond)}
	if err := h.s.Start(l, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	r := h.waitRun(l.RunID)
	if r.State != lease.RunAbandoned || !strings.Contains(r.Summary, "given back unstarted") {
		t.Errorf("run = %s %q, want abandoned and given back unstarted", r.State, r.Summary)
	}
	if task := h.task(l.TaskID); task.State != lease.TaskQueued || task.Attempts != 0 {
		t.Errorf("task = %s with %d attempts, want queued with its attempt refunded", task.State, task.Attempts)
	}
	time.Sleep(200 * time.Millisecond)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the child ran for a lease claimed too late")
	}
	if n := len(h.s.Snapshot()); n != 0 {
		t.Errorf("%d runs live after the give-back, want none", n)
	}

	// A claim that answered in time still starts.
	l2 := h.claim("{}", 4*time.Second)
	spec.Claimed = time.Now().Add(-time.Second)
	if err := h.s.Start(l2, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if r := h.waitRun(l2.RunID); r.State != lease.RunCompleted {
		t.Errorf("run claimed in time = %s %q, want completed", r.State, r.Summary)
	}
}
