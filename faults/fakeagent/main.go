// Command fakeagent is the agent the fault suite runs under qd. It records
// every start, tick and end of its run in an audit table from its own
// database connection, with clock_timestamp(), and then behaves as its
// payload (or $FA_MODE) says.
//
// Payload fields: mode (sleep, crash, ignoreterm, grandchild, setsid,
// pipehold, flood, line, env, hostile), ms (how long to work), exit (exit
// code), bytes (output size for flood and line), term_ms (work left after
// SIGTERM), ms_by_attempt (ms for each attempt in turn), ignore_term,
// term_exit (exit code once SIGTERM was handled); for hostile (hostile.go),
// victims and setsid.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

type params struct {
	Mode   string `json:"mode"`
	MS     int    `json:"ms"`
	Exit   int    `json:"exit"`
	Bytes  int64  `json:"bytes"`
	TermMS int    `json:"term_ms"`
	Marker string `json:"marker"`
	// IgnoreTerm ignores SIGTERM whatever the mode; TermExit is the exit
	// code after a SIGTERM was handled (default: Exit).
	IgnoreTerm bool `json:"ignore_term"`
	TermExit   int  `json:"term_exit"`
	// ByAttempt overrides MS for attempt i+1.
	ByAttempt []int `json:"ms_by_attempt"`
	// Victims is how many other runs a hostile agent waits for; Setsid
	// has it attack from a process out of its group too.
	Victims int  `json:"victims"`
	Setsid  bool `json:"setsid"`
}

type recorder struct {
	mu    sync.Mutex
	conn  *pgx.Conn
	table string
	run   []any // task_id, run_id, lane, attempt
}

func (r *recorder) event(pid int, ev string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := append(append([]any{}, r.run...), pid, ev)
	_, err := r.conn.Exec(ctx, "INSERT INTO "+r.table+
		" (task_id, run_id, lane, attempt, pid, event) VALUES ($1, $2, $3, $4, $5, $6)", args...)
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: audit %s: %v\n", ev, err)
	}
}

func main() {
	os.Exit(run())
}

func run() int {
	var p params
	switch os.Getenv("FA_ROLE") {
	case "grandchild":
		return grandchild()
	case "raw":
		return rawRole()
	}
	payload, _ := io.ReadAll(os.Stdin)
	_ = json.Unmarshal(payload, &p)
	if p.Mode == "" {
		p.Mode = os.Getenv("FA_MODE")
	}
	if p.MS == 0 {
		p.MS, _ = strconv.Atoi(os.Getenv("FA_MS"))
	}
	if a, _ := strconv.Atoi(os.Getenv("QD_ATTEMPT")); a >= 1 && a <= len(p.ByAttempt) {
		p.MS = p.ByAttempt[a-1]
	}
	if p.Mode == "ignoreterm" {
		p.IgnoreTerm = true
	}
	if p.IgnoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	terms := make(chan os.Signal, 1)
	if !p.IgnoreTerm {
		signal.Notify(terms, syscall.SIGTERM)
	}
	rec, err := connect()
	if err != nil {
		fmt.Fprintf(os.Stderr, "fakeagent: %v\n", err)
		return 97
	}
	self := os.Getpid()
	rec.event(self, "start")
	stop := ticker(rec, self)
	code := work(rec, p, terms)
	stop()
	rec.event(self, "end")
	rec.conn.Close(context.Background())
	return code
}

func connect() (*recorder, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, os.Getenv("FA_AUDIT_URL"))
	if err != nil {
		return nil, fmt.Errorf("connect audit: %w", err)
	}
	task, _ := strconv.ParseInt(os.Getenv("QD_TASK_ID"), 10, 64)
	runID, _ := strconv.ParseInt(os.Getenv("QD_RUN_ID"), 10, 64)
	attempt, _ := strconv.Atoi(os.Getenv("QD_ATTEMPT"))
	return &recorder{conn: conn, table: os.Getenv("FA_AUDIT_TABLE"),
		run: []any{task, runID, os.Getenv("QD_LANE"), attempt}}, nil
}

// ticker records a tick every FA_TICK_MS (default 100) until stopped, so
// that a killed agent's end is known to within one interval.
func ticker(rec *recorder, pid int) func() {
	every := 100 * time.Millisecond
	if ms, err := strconv.Atoi(os.Getenv("FA_TICK_MS")); err == nil && ms > 0 {
		every = time.Duration(ms) * time.Millisecond
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rec.event(pid, "tick")
			}
		}
	}()
	return func() { close(done); wg.Wait() }
}

func work(rec *recorder, p params, terms <-chan os.Signal) int {
	d := time.Duration(p.MS) * time.Millisecond
	switch p.Mode {
	case "crash":
		return max(p.Exit, 1)
	case "grandchild", "setsid", "pipehold":
		g, err := spawnGrandchild(p.Mode)
		if err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: grandchild: %v\n", err)
			return 98
		}
		rec.event(g, "spawn")
	case "flood":
		flood(p.Bytes, true)
	case "line":
		flood(p.Bytes, false)
	case "env":
		dumpEnv()
	case "hostile":
		if err := hostile(rec, p, d); err != nil {
			fmt.Fprintf(os.Stderr, "fakeagent: hostile: %v\n", err)
			return 96
		}
		return 0
	}
	select {
	case <-time.After(d):
	case <-terms:
		rec.event(os.Getpid(), "term")
		time.Sleep(time.Duration(p.TermMS) * time.Millisecond)
		if p.TermExit != 0 {
			return p.TermExit
		}
	}
	fmt.Println("fakeagent done", p.Marker)
	return p.Exit
}

// spawnGrandchild starts this program again as a grandchild that keeps
// ticking for the same run: in the agent's group (grandchild), in a session
// of its own (setsid), or holding the agent's stdout (pipehold).
func spawnGrandchild(mode string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), "FA_ROLE=grandchild")
	if mode == "setsid" {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if mode == "pipehold" {
		cmd.Stdout = os.Stdout
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// grandchild ticks for its run for up to ten minutes.
func grandchild() int {
	rec, err := connect()
	if err != nil {
		return 97
	}
	self := os.Getpid()
	for range 6000 {
		rec.event(self, "gtick")
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

func flood(n int64, lines bool) {
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = 'x'
		if lines && i%100 == 99 {
			buf[i] = '\n'
		}
	}
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := os.Stdout.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
	if !lines {
		os.Stdout.Write([]byte("\n"))
	}
}

// dumpEnv writes the environment and command line to $FA_OUT/env.<run>.
func dumpEnv() {
	var b strings.Builder
	for _, kv := range os.Environ() {
		b.WriteString(kv + "\n")
	}
	cmdline, _ := os.ReadFile("/proc/self/cmdline")
	b.WriteString("cmdline=" + strings.ReplaceAll(string(cmdline), "\x00", " ") + "\n")
	_ = os.WriteFile(os.Getenv("FA_OUT")+"/env."+os.Getenv("QD_RUN_ID"), []byte(b.String()), 0o600)
}
