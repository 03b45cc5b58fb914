package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
)

// Limits of one notification.
const (
	CommandTimeout = 30 * time.Second
	WebhookTimeout = 10 * time.Second
	// QueueLen bounds the notifications waiting to be sent.
	QueueLen = 64
	// detailMax bounds what is recorded of a command's output or a
	// webhook's answer.
	detailMax = 500
)

// Event is what happened, as a notification tells it (the JSON on a
// command's stdin and in a webhook's body).
type Event struct {
	Event       string    `json:"event"` // failed, timeout, stall, lease_lost
	TaskID      int64     `json:"task_id"`
	RunID       int64     `json:"run_id"`
	Agent       string    `json:"agent"`
	Lane        string    `json:"lane"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	Outcome     string    `json:"outcome"`
	ExitCode    *int      `json:"exit_code"`
	Signal      string    `json:"signal,omitempty"`
	Summary     string    `json:"summary"`
	OutputTail  string    `json:"output_tail"`
	Host        string    `json:"host"`
	Daemon      string    `json:"daemon"`
	At          time.Time `json:"at"`
}

// Target is one whom to tell: a command or a webhook.
type Target struct {
	Command []string
	Webhook string
}

// String is how the target is recorded.
func (t Target) String() string {
	if t.Webhook != "" {
		return t.Webhook
	}
	return strings.Join(t.Command, " ")
}

// Recorder is what the sender needs of the queue.
type Recorder interface {
	ClaimNotification(ctx context.Context, n lease.Notification) (int64, bool, error)
	FinishNotification(ctx context.Context, id int64, status lease.NotificationStatus, detail string) error
}

// Config wires a Sender.
type Config struct {
	Recorder Recorder
	Logger   hclog.Logger
	// Env is the environment of commands, before the QD_ variables.
	Env []string
	// Daemon names the sender in records.
	Daemon string
}

type job struct {
	e Event
	t Target
}

// Sender sends notifications from a goroutine of its own; see Run.
type Sender struct {
	cfg                   Config
	queue                 chan job
	client                *http.Client
	sent, failed, dropped atomic.Uint64
}

// New returns a Sender; start Run to send.
func New(cfg Config) *Sender {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Sender{cfg: cfg, queue: make(chan job, QueueLen), client: &http.Client{Timeout: WebhookTimeout}}
}

// Notify queues e for each target and returns at once. When the queue is
// full the notification is dropped, logged and counted.
func (s *Sender) Notify(e Event, targets ...Target) {
	for _, t := range targets {
		select {
		case s.queue <- job{e, t}:
		default:
			s.dropped.Add(1)
			s.cfg.Logger.Warn("notification dropped: too many waiting", "event", e.Event, "run_id", e.RunID, "target", t.String())
		}
	}
}

// Counts says how many notifications were sent, failed and dropped.
func (s *Sender) Counts() (sent, failed, dropped uint64) {
	return s.sent.Load(), s.failed.Load(), s.dropped.Load()
}

// Run sends queued notifications until ctx ends.
func (s *Sender) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case j := <-s.queue:
			s.send(ctx, j)
		}
	}
}

// send claims j, tells its target, and records how it went.
func (s *Sender) send(ctx context.Context, j job) {
	log := s.cfg.Logger.With("event", j.e.Event, "task_id", j.e.TaskID, "run_id", j.e.RunID, "target", j.t.String())
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	id, first, err := s.cfg.Recorder.ClaimNotification(cctx, lease.Notification{TaskID: j.e.TaskID, RunID: j.e.RunID,
		Event: j.e.Event, Target: j.t.String(), SentBy: s.cfg.Daemon})
	cancel()
	switch {
	case err != nil:
		s.failed.Add(1)
		log.Error("notification not sent: cannot record it", "error", err)
		return
	case !first:
		log.Debug("notification already sent by another daemon")
		return
	}
	body, _ := json.Marshal(j.e)
	var detail string
	if j.t.Webhook != "" {
		detail, err = s.post(ctx, j.t.Webhook, body)
	} else {
		detail, err = s.run(ctx, j.t.Command, j.e, body)
	}
	status := lease.NotificationSent
	if err != nil {
		status, detail = lease.NotificationFailed, bound(err.Error()+": "+detail)
		s.failed.Add(1)
		log.Error("notification failed", "error", err, "detail", detail)
	} else {
		s.sent.Add(1)
		log.Info("notification sent")
	}
	cctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.cfg.Recorder.FinishNotification(cctx, id, status, bound(detail)); err != nil {
		log.Warn("record the notification's outcome", "error", err)
	}
}

// run runs a notification command with body on stdin.
func (s *Sender) run(ctx context.Context, argv []string, e Event, body []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(append([]string{}, s.cfg.Env...), eventEnv(e)...)
	cmd.Stdin = bytes.NewReader(body)
	cmd.WaitDelay = time.Second
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		return string(out), fmt.Errorf("%s did not finish within %s", argv[0], CommandTimeout)
	}
	if err != nil {
		return string(out), fmt.Errorf("%s: %w", argv[0], err)
	}
	return strings.TrimSpace(string(out)), nil
}

// post posts body to url; a status other than 2xx is a failure.
func (s *Sender) post(ctx context.Context, url string, body []byte) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("webhook request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "qd")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("post to webhook: %w", err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, detailMax))
	detail := resp.Status
	if len(bytes.TrimSpace(answer)) > 0 {
		detail += ": " + strings.TrimSpace(string(answer))
	}
	if resp.StatusCode/100 != 2 {
		return detail, fmt.Errorf("webhook answered %s", resp.Status)
	}
	return detail, nil
}

// eventEnv is e as QD_ variables.
func eventEnv(e Event) []string {
	env := []string{
		"QD_EVENT=" + e.Event,
		"QD_TASK_ID=" + strconv.FormatInt(e.TaskID, 10),
		"QD_RUN_ID=" + strconv.FormatInt(e.RunID, 10),
		"QD_AGENT=" + e.Agent,
		"QD_LANE=" + e.Lane,
		"QD_ATTEMPT=" + strconv.Itoa(e.Attempt),
		"QD_MAX_ATTEMPTS=" + strconv.Itoa(e.MaxAttempts),
		"QD_OUTCOME=" + e.Outcome,
		"QD_SIGNAL=" + e.Signal,
		"QD_SUMMARY=" + e.Summary,
		"QD_HOST=" + e.Host,
	}
	if e.ExitCode != nil {
		env = append(env, "QD_EXIT_CODE="+strconv.Itoa(*e.ExitCode))
	}
	return env
}

func bound(s string) string {
	if len(s) <= detailMax {
		return s
	}
	return s[:detailMax] + "…"
}
