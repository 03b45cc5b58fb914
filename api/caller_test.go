package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
)

// callerRig is a server over a fake daemon with two live runs: run 10 of
// task 1 (token "tok-a"), which enqueued task 3, and run 20 of task 2
// (token "tok-b"), which enqueued task 4. peer says which run the test
// process is taken for, as if it were in that run's process group.
type callerRig struct {
	path   string
	tokens map[string]RunRef
	calls  atomic.Int64
	peer   atomic.Pointer[peerAnswer]
	log    *SyncLog
}

type peerAnswer struct {
	run RunRef
	err error
}

func mustCallerRig(t *testing.T) *callerRig {
	t.Helper()
	return mustRig(t, Listen)
}

func mustRig(t *testing.T, listen func(string, Daemon, hclog.Logger) (*Server, error)) *callerRig {
	t.Helper()
	rig := &callerRig{path: socketPath(t), log: &SyncLog{}, tokens: map[string]RunRef{"tok-a": {10, 1}, "tok-b": {20, 2}}}
	rig.peer.Store(&peerAnswer{})
	d := fakeDaemon{
		tokens:  rig.tokens,
		parents: map[int64]int64{3: 10, 4: 20},
		calls:   &rig.calls,
		peer: func(pid int) (RunRef, error) {
			if pid != os.Getpid() {
				return RunRef{}, fmt.Errorf("peer pid %d, want this test's %d", pid, os.Getpid())
			}
			a := rig.peer.Load()
			return a.run, a.err
		},
	}
	logger := hclog.New(&hclog.LoggerOptions{Output: io.MultiWriter(rig.log, tlogWriter{t}), Level: hclog.Debug})
	s, err := listen(rig.path, d, logger)
	if err != nil {
		t.Fatal(err)
	}
	MustServe(t, s)
	return rig
}

// send sends method path with token (none when empty) and returns the
// status, the body, and whether the daemon was asked.
func (rig *callerRig) send(t *testing.T, method, path, token, body string) (int, string, bool) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", rig.path)
	}}}
	req, err := http.NewRequest(method, "http://qd"+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set(TokenHeader, token)
	}
	before := rig.calls.Load()
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), rig.calls.Load() > before
}

// Ensure the socket's rules: the operator may do everything; a run, proved
// by its token or by its process, may read, enqueue (as its own child),
// wake, report progress for itself alone and cancel only its own task and
// those it enqueued; a token of no live run, a token sent from another
// run's process, and a peer that is gone are refused whatever they ask.
// Every refusal is 403, says what is allowed, reaches no daemon method,
// and is logged with the peer's pid and run.
func TestServer_CallerRules(t *testing.T) {
	rig := mustCallerRig(t)
	runA := RunRef{RunID: 10, TaskID: 1}
	gone := errors.New("no such process")
	enqueue := `{"lane":"l","agent":"a"}`
	tests := []struct {
		name         string
		peer         RunRef
		peerErr      error
		token        string
		method, path string
		want         int
		words        []string // in a refusal
	}{
		{"Operator/ProgressOther", RunRef{}, nil, "", "POST", "/v1/runs/20/progress", 204, nil},
		{"Operator/CancelAny", RunRef{}, nil, "", "POST", "/v1/tasks/2/cancel", 200, nil},
		{"Token/ProgressSelf", RunRef{}, nil, "tok-a", "POST", "/v1/runs/10/progress", 204, nil},
		{"Token/ProgressOther", RunRef{}, nil, "tok-a", "POST", "/v1/runs/20/progress", 403,
			[]string{"run 10 may report progress only for itself", "not for run 20"}},
		{"Token/CancelOwnTask", RunRef{}, nil, "tok-a", "POST", "/v1/tasks/1/cancel", 200, nil},
		{"Token/CancelEnqueued", RunRef{}, nil, "tok-a", "POST", "/v1/tasks/3/cancel", 200, nil},
		{"Token/CancelOthersTask", RunRef{}, nil, "tok-a", "POST", "/v1/tasks/2/cancel", 403,
			[]string{"run 10 may cancel only its own task (1) and the tasks it enqueued; task 2 is neither"}},
		{"Token/CancelOthersFollowUp", RunRef{}, nil, "tok-a", "POST", "/v1/tasks/4/cancel", 403, []string{"task 4 is neither"}},
		{"Token/CancelUnknown", RunRef{}, nil, "tok-a", "POST", "/v1/tasks/404/cancel", 404, nil},
		{"Token/Status", RunRef{}, nil, "tok-a", "GET", "/v1/status", 200, nil},
		{"Token/Wake", RunRef{}, nil, "tok-a", "POST", "/v1/agents/builder/wake", 204, nil},
		{"Process/ProgressSelf", runA, nil, "", "POST", "/v1/runs/10/progress", 204, nil},
		{"Process/ProgressOther", runA, nil, "", "POST", "/v1/runs/20/progress", 403, []string{"not for run 20"}},
		{"Process/CancelOthersTask", runA, nil, "", "POST", "/v1/tasks/2/cancel", 403, []string{"task 2 is neither"}},
		{"Process/CancelEnqueued", runA, nil, "", "POST", "/v1/tasks/3/cancel", 200, nil},
		{"Process/OwnToken", runA, nil, "tok-a", "POST", "/v1/runs/10/progress", 204, nil},
		{"Forged/Progress", RunRef{}, nil, "tok-forged", "POST", "/v1/runs/20/progress", 403,
			[]string{"matches no live run of this daemon", "the run has ended, or the token is not this daemon's"}},
		{"Forged/Status", RunRef{}, nil, "tok-forged", "GET", "/v1/status", 403, []string{"matches no live run"}},
		{"Stolen/Progress", RunRef{RunID: 20, TaskID: 2}, nil, "tok-a", "POST", "/v1/runs/10/progress", 403,
			[]string{"the run token is run 10's, but the request comes from a process of run 20"}},
		{"Stolen/Cancel", RunRef{RunID: 20, TaskID: 2}, nil, "tok-a", "POST", "/v1/tasks/1/cancel", 403, []string{"is run 10's"}},
		{"GonePeer/Cancel", RunRef{}, gone, "", "POST", "/v1/tasks/2/cancel", 403, []string{"is gone"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rig.peer.Store(&peerAnswer{run: tt.peer, err: tt.peerErr})
			got, body, asked := rig.send(t, tt.method, tt.path, tt.token, "")
			if got != tt.want {
				t.Fatalf("%s %s: status %d (%s), want %d", tt.method, tt.path, got, body, tt.want)
			}
			if tt.want != 403 {
				return
			}
			if asked {
				t.Errorf("a refused request reached the daemon")
			}
			if !strings.HasPrefix(body, "refused: ") || strings.Contains(body, "\n") {
				t.Errorf("refusal %q: want one line that starts with \"refused: \"", body)
			}
			for _, w := range tt.words {
				if !strings.Contains(body, w) {
					t.Errorf("refusal %q does not say %q", body, w)
				}
			}
			run := tt.peer.RunID // the run proved, else the peer's
			if owner, ok := rig.tokens[tt.token]; ok && run == 0 {
				run = owner.RunID
			}
			line := rig.log.Last("socket request refused")
			if want := fmt.Sprintf("peer_pid=%d peer_run=%d", os.Getpid(), run); !strings.Contains(line, want) {
				t.Errorf("refusal logged as %q, want it to hold %q", line, want)
			}
			if tt.token != "" && strings.Contains(rig.log.String(), tt.token) {
				t.Errorf("the log holds the token %q", tt.token)
			}
		})
	}
	t.Run("EnqueueRecordsTheRun", func(t *testing.T) {
		// Ensure an enqueue's parent is the run proved, by token or by
		// process, and none for the operator.
		for _, c := range []struct {
			peer  RunRef
			token string
			want  int64
		}{{RunRef{}, "", 0}, {RunRef{}, "tok-b", 20}, {runA, "", 10}} {
			rig.peer.Store(&peerAnswer{run: c.peer})
			code, body, _ := rig.send(t, "POST", TasksPath, c.token, enqueue)
			var res Enqueued
			if err := json.Unmarshal([]byte(body), &res); code != 200 || err != nil || res.ParentRun != c.want {
				t.Errorf("enqueue as %+v/%q: %d %s; want parent_run %d", c.peer, c.token, code, body, c.want)
			}
		}
	})
}

// Ensure the runs' socket (ListenRuns) is open to every user and serves
// only runs: a run proved by its token or its process is answered as on
// the daemon's socket, with the same rules, and anyone else, whatever it
// asks, is refused in a line that says how to be proved and names the
// daemon's own socket, without the daemon being asked.
func TestListenRuns_RunsOnly(t *testing.T) {
	rig := mustRig(t, ListenRuns)
	if fi, err := os.Stat(rig.path); err != nil || fi.Mode().Perm() != 0o666 {
		t.Fatalf("runs' socket: %v, mode %v; want 0666", err, fi.Mode().Perm())
	}
	for _, c := range []struct {
		name         string
		peer         RunRef
		token        string
		method, path string
		want         int
	}{
		{"Token/Status", RunRef{}, "tok-a", "GET", StatusPath, 200},
		{"Token/ProgressSelf", RunRef{}, "tok-a", "POST", "/v1/runs/10/progress", 204},
		{"Token/ProgressOther", RunRef{}, "tok-a", "POST", "/v1/runs/20/progress", 403},
		{"Process/ProgressSelf", RunRef{RunID: 10, TaskID: 1}, "", "POST", "/v1/runs/10/progress", 204},
		{"Nobody/Status", RunRef{}, "", "GET", StatusPath, 403},
		{"Nobody/Cancel", RunRef{}, "", "POST", "/v1/tasks/2/cancel", 403},
		{"Nobody/Enqueue", RunRef{}, "", "POST", TasksPath, 403},
		{"Forged/Status", RunRef{}, "tok-forged", "GET", StatusPath, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			rig.peer.Store(&peerAnswer{run: c.peer})
			got, body, asked := rig.send(t, c.method, c.path, c.token, `{"lane":"l","agent":"a"}`)
			if got != c.want {
				t.Fatalf("%s %s: %d (%s), want %d", c.method, c.path, got, body, c.want)
			}
			if c.want == 403 && asked {
				t.Error("a refused request reached the daemon")
			}
			if c.peer.RunID == 0 && c.token == "" && !strings.Contains(body, "serves only the runs") {
				t.Errorf("refusal %q does not say the socket serves runs only", body)
			}
		})
	}
}

// Ensure a Client with a Token sends it, and that a refusal comes back as
// ErrRefused with the daemon's one line.
func TestClient_Token(t *testing.T) {
	rig := mustCallerRig(t)
	ctx := context.Background()
	if err := (Client{Path: rig.path, Token: "tok-a"}).Progress(ctx, 10); err != nil {
		t.Errorf("progress of run 10 with its token: %v", err)
	}
	err := Client{Path: rig.path, Token: "tok-a"}.Progress(ctx, 20)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "run 10 may report progress only for itself") {
		t.Errorf("progress of run 20 with run 10's token: %v; want ErrRefused saying what run 10 may do", err)
	}
	_, err = Client{Path: rig.path, Token: "tok-a"}.CancelTask(ctx, 2)
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "task 2 is neither") {
		t.Errorf("cancel of task 2 with run 10's token: %v; want ErrRefused", err)
	}
	if _, err := (Client{Path: rig.path}).CancelTask(ctx, 2); err != nil {
		t.Errorf("cancel of task 2 by the operator: %v", err)
	}
}

// SyncLog is a log buffer safe for the server and the test at once.
type SyncLog struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (l *SyncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *SyncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

// Last is the last line of the log that holds text, "" when none does.
func (l *SyncLog) Last(text string) string {
	lines := strings.Split(l.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], text) {
			return lines[i]
		}
	}
	return ""
}
