package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/qd-run/qd/api"
)

// daemonProc is a `qd run` process the bench started, with its config,
// socket, state directory and log in a temporary directory of its own.
type daemonProc struct {
	name    string
	dir     string
	socket  string
	state   string
	logPath string
	cmd     *exec.Cmd
	logFile *os.File
	done    chan struct{}
	waitErr error // set before done is closed
}

// startDaemon writes a config of the bench's settings plus body (agent
// blocks), starts `qd run` on it with QD_DATABASE_URL set to dbURL, and
// waits until its status socket answers. The daemon is put in a process
// group of its own and killed by the kernel if the bench dies; its
// children die with it (the supervisor sets their parent-death signal).
func (b *runner) startDaemon(ctx context.Context, dbURL, name, body string) (*daemonProc, error) {
	bin := b.o.QD
	// Short paths: a unix socket path must fit in 104 bytes.
	dir, err := os.MkdirTemp("", "qd-bench-")
	if err != nil {
		return nil, fmt.Errorf("create daemon directory: %w", err)
	}
	// A private cluster started by a daemon run as root belongs to another
	// user, who must pass through.
	if err := os.Chmod(dir, 0o711); err != nil {
		return nil, fmt.Errorf("create daemon directory: %w", err)
	}
	p := &daemonProc{
		name: name, dir: dir,
		socket:  filepath.Join(dir, "qd.sock"),
		state:   filepath.Join(dir, "state"),
		logPath: filepath.Join(dir, "qd.log"),
		done:    make(chan struct{}),
	}
	conf := fmt.Sprintf("name = %q\nsocket = %q\nstate_dir = %q\nlog_level = \"info\"\nlog_format = \"json\"\nshutdown_grace = \"5s\"\n%s",
		name, p.socket, p.state, body)
	confPath := filepath.Join(dir, "qd.hcl")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("write daemon config: %w", err)
	}
	if p.logFile, err = os.Create(p.logPath); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("create daemon log: %w", err)
	}
	p.cmd = exec.Command(bin, "run", "--config", confPath)
	p.cmd.Env = daemonEnv(dbURL)
	p.cmd.Stdout, p.cmd.Stderr = p.logFile, p.logFile
	p.cmd.SysProcAttr = daemonAttr()
	if err := p.cmd.Start(); err != nil {
		p.logFile.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s run: %w", bin, err)
	}
	go func() {
		p.waitErr = p.cmd.Wait()
		close(p.done)
	}()
	b.log.Info("started daemon", "name", name, "pid", p.cmd.Process.Pid)
	if err := p.ready(ctx); err != nil {
		p.stop(b)
		return nil, err
	}
	return p, nil
}

// daemonEnv is this process's environment without any QD_ setting, plus
// the database URL (none when empty: the daemon starts its private
// cluster); a binary built with the race detector does not pause at exit.
func daemonEnv(dbURL string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QD_") {
			env = append(env, kv)
		}
	}
	if os.Getenv("GORACE") == "" {
		env = append(env, "GORACE=atexit_sleep_ms=0")
	}
	if dbURL == "" {
		return env
	}
	return append(env, "QD_DATABASE_URL="+dbURL)
}

// ready waits until the daemon's status socket answers.
func (p *daemonProc) ready(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := p.fetch(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("daemon %s exited before its socket answered: %v\n%s", p.name, p.waitErr, p.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("daemon %s: socket %s did not answer within 30 s: %w\n%s", p.name, p.socket, err, p.logTail())
		}
	}
}

// fetch asks the daemon for its api.
func (p *daemonProc) fetch(ctx context.Context) (*api.Snapshot, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return api.Client{Path: p.socket}.Status(ctx)
}

// sentTransactions reads the daemon's count of the transactions it sent
// from its metrics; -1 when they have none.
func (p *daemonProc) sentTransactions(ctx context.Context) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	text, err := api.Client{Path: p.socket}.Metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("read daemon %s metrics: %w", p.name, err)
	}
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(line, "qd_database_transactions_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("daemon %s metrics: qd_database_transactions_total %q: %w", p.name, v, err)
			}
			return int64(f), nil
		}
	}
	return -1, nil
}

// metric reads one sample of the daemon's metrics by its name and labels
// as exposed ("qd_heartbeat_duration_seconds_count"); 0 when absent.
func (p *daemonProc) metric(ctx context.Context, name string) (float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	text, err := api.Client{Path: p.socket}.Metrics(ctx)
	if err != nil {
		return 0, fmt.Errorf("read daemon %s metrics: %w", p.name, err)
	}
	for line := range strings.Lines(string(text)) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return 0, fmt.Errorf("daemon %s metrics: %s %q: %w", p.name, name, v, err)
			}
			return f, nil
		}
	}
	return 0, nil
}

// pid is the daemon's process id.
func (p *daemonProc) pid() int { return p.cmd.Process.Pid }

// alive returns an error naming the daemon's end when it has exited.
func (p *daemonProc) alive() error {
	select {
	case <-p.done:
		return fmt.Errorf("daemon %s exited: %v\n%s", p.name, p.waitErr, p.logTail())
	default:
		return nil
	}
}

// stop sends SIGTERM (the daemon drains its children and settles their
// runs), kills the daemon's process group when it has not exited within
// 15 s, and removes its directory.
func (p *daemonProc) stop(b *runner) {
	p.halt(b)
	p.remove(b)
}

// halt stops the daemon as stop does, and keeps its directory.
func (p *daemonProc) halt(b *runner) {
	if p.alive() == nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			b.log.Warn("daemon did not stop within 15 s; killing it", "name", p.name, "pid", p.pid())
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			<-p.done
		}
	}
	// Anything left in the daemon's group (nothing, normally).
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
}

// remove removes the directory of a halted daemon.
func (p *daemonProc) remove(b *runner) {
	p.logFile.Close()
	if err := os.RemoveAll(p.dir); err != nil {
		b.log.Warn("remove daemon directory", "dir", p.dir, "error", err)
	}
	b.log.Info("stopped daemon", "name", p.name)
}

// logTail returns the end of the daemon's log, for errors.
func (p *daemonProc) logTail() string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return ""
	}
	const max = 4000
	if len(data) > max {
		data = data[len(data)-max:]
	}
	return string(data)
}

// childStarts reads the daemon's JSON log and returns, for each run the
// supervisor started a child for, the time it logged "child started":
// just after the fork and exec returned, by the daemon's clock, to the
// microsecond.
func (p *daemonProc) childStarts() (map[int64]time.Time, error) {
	f, err := os.Open(p.logPath)
	if err != nil {
		return nil, fmt.Errorf("read daemon log: %w", err)
	}
	defer f.Close()
	out := map[int64]time.Time{}
	r := bufio.NewReaderSize(f, 1<<16)
	for {
		line, err := r.ReadBytes('\n')
		if bytes.Contains(line, []byte(`"child started"`)) {
			var rec struct {
				At    string `json:"@timestamp"`
				Msg   string `json:"@message"`
				RunID int64  `json:"run_id"`
			}
			if jerr := json.Unmarshal(line, &rec); jerr == nil && rec.Msg == "child started" {
				at, perr := time.Parse("2006-01-02T15:04:05.000000Z07:00", rec.At)
				if perr != nil {
					return nil, fmt.Errorf("read daemon log: time %q: %w", rec.At, perr)
				}
				out[rec.RunID] = at
			}
		}
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("read daemon log: %w", err)
		}
	}
}
