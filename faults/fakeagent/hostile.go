package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// victim is another run the audit shows started.
type victim struct {
	task, run int64
	pid       int
	token     string // stolen from its environment
}

// hostileReport is what a hostile agent writes to $FA_OUT/hostile.<run>.
type hostileReport struct {
	Sent    int    `json:"sent"`
	Refused int    `json:"refused"`
	Wrong   string `json:"wrong,omitempty"` // the first answer that was not a refusal
	Own     int    `json:"own"`             // the status of its progress for itself
	Victims int    `json:"victims"`
}

// hostile attacks every other run through the daemon's socket for d:
// progress reports for them and cancels of their tasks, without a token,
// with a forged one and with each victim's own token read from its /proc
// environment, and once each from a process that left this run's group
// (p.Setsid). Then it reports progress for itself, which must be allowed.
func hostile(rec *recorder, p params, d time.Duration) error {
	self, _ := strconv.ParseInt(os.Getenv("QD_RUN_ID"), 10, 64)
	vs, err := rec.victims(self, p.Victims, 30*time.Second)
	if err != nil {
		return err
	}
	rep := hostileReport{Victims: len(vs)}
	tally := func(code int, body string, what string) {
		rep.Sent++
		if code == http.StatusForbidden && strings.HasPrefix(body, "refused: ") {
			rep.Refused++
		} else if rep.Wrong == "" {
			rep.Wrong = fmt.Sprintf("%s: %d %s", what, code, body)
		}
	}
	if p.Setsid {
		for _, v := range vs {
			for _, req := range attacks(v)[:3] {
				code, body := escaped(req.method, req.path, req.token)
				tally(code, body, "setsid "+req.String())
			}
		}
	}
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for _, v := range vs {
			for _, req := range attacks(v) {
				code, body := raw(req.method, req.path, req.token)
				tally(code, body, req.String())
			}
		}
	}
	rep.Own, _ = raw("POST", fmt.Sprintf("/v1/runs/%d/progress", self), os.Getenv("QD_RUN_TOKEN"))
	b, _ := json.Marshal(rep)
	return os.WriteFile(fmt.Sprintf("%s/hostile.%d", os.Getenv("FA_OUT"), self), b, 0o600)
}

type attack struct{ method, path, token string }

func (a attack) String() string {
	tok := "no token"
	if a.token != "" {
		tok = "token " + a.token[:min(6, len(a.token))] + "…"
	}
	return a.method + " " + a.path + " (" + tok + ")"
}

// attacks are the requests aimed at v.
func attacks(v victim) []attack {
	progress := fmt.Sprintf("/v1/runs/%d/progress", v.run)
	cancel := fmt.Sprintf("/v1/tasks/%d/cancel", v.task)
	return []attack{
		{"POST", progress, ""}, {"POST", cancel, ""}, {"POST", progress, v.token},
		{"POST", cancel, v.token}, {"POST", progress, "forged-" + v.token[:min(8, len(v.token))]},
		{"POST", cancel, "forged"},
	}
}

// victims waits until the audit shows n runs other than self started and
// returns them, with the tokens read from their environments.
func (r *recorder) victims(self int64, n int, within time.Duration) ([]victim, error) {
	deadline := time.Now().Add(within)
	for {
		vs, err := r.started(self)
		if err == nil && len(vs) >= n {
			for i := range vs {
				vs[i].token = tokenOf(vs[i].pid)
			}
			return vs, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d victims started within %s, want %d (%v)", len(vs), within, n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *recorder) started(self int64) ([]victim, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := r.conn.Query(ctx, "SELECT task_id, run_id, pid FROM "+r.table+" WHERE event = 'start' AND run_id <> $1", self)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var vs []victim
	for rows.Next() {
		var v victim
		if err := rows.Scan(&v.task, &v.run, &v.pid); err != nil {
			return nil, err
		}
		vs = append(vs, v)
	}
	return vs, rows.Err()
}

// tokenOf reads QD_RUN_TOKEN from process pid's environment, as any
// process of the same user can.
func tokenOf(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	for _, kv := range bytes.Split(b, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, []byte("QD_RUN_TOKEN=")); ok {
			return string(v)
		}
	}
	return ""
}

// raw sends one request to $QD_SOCKET and returns the status and the
// answer's first line (0 and the error when none came).
func raw(method, path, token string) (int, string) {
	sock := os.Getenv("QD_SOCKET")
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	req, err := http.NewRequest(method, "http://qd"+path, nil)
	if err != nil {
		return 0, err.Error()
	}
	if token != "" {
		req.Header.Set("Qd-Run-Token", token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	return resp.StatusCode, line
}

// escaped sends the request from a copy of this program in a session of
// its own: out of this run's process group (and, where runs have cgroups,
// still in its cgroup).
func escaped(method, path, token string) (int, string) {
	self, err := os.Executable()
	if err != nil {
		return 0, err.Error()
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "FA_ROLE=raw", "FA_RAW="+method+" "+path, "FA_RAW_TOKEN="+token)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out, err := cmd.Output()
	if err != nil {
		return 0, err.Error()
	}
	codeText, body, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	code, _ := strconv.Atoi(codeText)
	return code, body
}

// rawRole is escaped's other end: one request, its answer on stdout.
func rawRole() int {
	method, path, _ := strings.Cut(os.Getenv("FA_RAW"), " ")
	code, body := raw(method, path, os.Getenv("FA_RAW_TOKEN"))
	fmt.Println(code, body)
	return 0
}
