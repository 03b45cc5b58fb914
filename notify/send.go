package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
)

// start tells j to t from a goroutine of its own.
func (s *Sender) start(ctx context.Context, j lease.NotificationJob, t Target, plan Plan) {
	s.mu.Lock()
	ts := s.targets[j.Target]
	if ts == nil {
		ts = &target{}
		s.targets[j.Target] = ts
	}
	ts.inflight++
	s.mu.Unlock()
	s.sends.Add(1)
	go func() {
		defer s.sends.Done()
		s.send(ctx, j, t, plan)
		s.mu.Lock()
		ts.inflight--
		s.mu.Unlock()
		s.Kick() // room for the next
	}()
}

// send makes one try of j and records how it went: sent, pending again
// after its backoff, or failed for good once the next try would come after
// the plan's give-up age.
func (s *Sender) send(ctx context.Context, j lease.NotificationJob, t Target, plan Plan) {
	log := s.cfg.Logger.With("event", j.Event, "task_id", j.TaskID, "run_id", j.RunID, "target", j.Target,
		"notification_id", j.ID, "try", j.Tries)
	body, _ := json.Marshal(eventOf(j, s.host))
	timeout := plan.timeout(t)
	tctx, cancel := context.WithTimeout(ctx, timeout)
	var detail string
	var err error
	if t.Webhook != "" {
		detail, err = post(tctx, t.Webhook, body, j.ID, timeout)
	} else {
		detail, err = s.command(tctx, t.Command, eventEnv(eventOf(j, s.host)), body, timeout)
	}
	cancel()
	var res lease.NotifyResult
	switch {
	case err == nil:
		res = lease.NotifyResult{Status: lease.NotificationSent, Detail: bound(detail)}
		s.sent.Add(1)
		s.up(j.Target, log)
		log.Info("notification sent")
	case ctx.Err() != nil: // the daemon stops: another try, soon, by whoever runs next
		res = lease.NotifyResult{Status: lease.NotificationPending, Detail: bound("stopped by the daemon's shutdown: " + err.Error())}
		log.Warn("notification cut short by shutdown; it will be tried again")
	default:
		msg := bound(joinDetail(err.Error(), detail))
		retry, giveUp := plan.retryIn(j.Tries), plan.giveUp()
		s.down(j.Target, msg, plan.retryIn(s.fails(j.Target)+1), log)
		if j.Age+retry > giveUp {
			res = lease.NotifyResult{Status: lease.NotificationFailed, Detail: lease.GiveUpDetail(giveUp, j.Tries, msg)}
			s.failed.Add(1)
			log.Error("notification failed for good", "error", msg, "tries", j.Tries)
		} else {
			res = lease.NotifyResult{Status: lease.NotificationPending, Detail: msg, RetryIn: retry}
			s.retried.Add(1)
			log.Warn("notification failed; will retry", "error", msg, "retry_in", retry)
		}
	}
	s.finish(j, res, log)
}

// finish records res, retrying a few times while the queue is out of
// reach: a try left unrecorded is tried again once its claim runs out.
func (s *Sender) finish(j lease.NotificationJob, res lease.NotifyResult, log hclog.Logger) {
	wait := 500 * time.Millisecond
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.cfg.Queue.FinishNotification(ctx, j.ID, j.Tries, res)
		cancel()
		switch {
		case err == nil:
			return
		case errors.Is(err, lease.ErrLeaseLost):
			log.Warn("notification's claim ran out before its try was recorded; it is tried again", "status", res.Status)
			return
		case i == 4:
			log.Error("record how a notification went; it is tried again once its claim runs out", "error", err)
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

// up marks target name as answering.
func (s *Sender) up(name string, log hclog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[name]
	if t.fails > 0 {
		log.Info("notification target answers again", "down_for", time.Since(t.since).Round(time.Second), "failed_tries", t.fails)
	}
	t.fails, t.lastErr = 0, ""
}

// down marks target name as failing: it is probed again, one try at a
// time, after wait.
func (s *Sender) down(name, msg string, wait time.Duration, log hclog.Logger) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.targets[name]
	if t.fails == 0 {
		t.since = time.Now()
		log.Warn("notification target down: its notifications wait, and it is tried one at a time", "error", msg)
	}
	t.fails++
	t.lastErr, t.nextProbe = msg, time.Now().Add(wait)
}

func (s *Sender) fails(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.targets[name].fails
}

func joinDetail(err, detail string) string {
	if detail = strings.TrimSpace(detail); detail == "" {
		return err
	}
	return err + ": " + detail
}

// webhookClient posts; it follows no redirect (a 3xx answer is a failure)
// and each try's context bounds it.
var webhookClient = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// post posts body to raw; a status other than 2xx is a failure. Nothing it
// returns holds the URL's secrets: the error of the HTTP client, which
// names the URL, is unwrapped, and whatever the answer echoes is scrubbed.
func post(ctx context.Context, raw string, body []byte, id int64, timeout time.Duration) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, raw, bytes.NewReader(body))
	if err != nil {
		return "", errors.New("the webhook URL does not make a request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "qd")
	req.Header.Set("Idempotency-Key", "qd-notification-"+strconv.FormatInt(id, 10))
	resp, err := webhookClient.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("no answer within %s", timeout)
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("post: %s", scrub(err.Error(), raw))
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, detailMax))
	detail := resp.Status
	if a := strings.TrimSpace(string(answer)); a != "" {
		detail += ": " + scrub(a, raw)
	}
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("webhook answered %s", detail)
	}
	return detail, nil
}

// scrub removes from s the parts of webhook URL raw that may be secret:
// the whole URL, its password, user, path and query.
func scrub(s, raw string) string {
	cut := func(part string, least int) {
		if len(part) >= least {
			s = strings.ReplaceAll(s, part, "…")
		}
	}
	cut(raw, 1)
	u, err := url.Parse(raw)
	if err != nil {
		return s
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		cut(pw, 3)
		cut(u.User.Username(), 3)
	}
	cut(u.EscapedPath(), 4)
	cut(u.Path, 4)
	cut(u.RawQuery, 4)
	for _, seg := range strings.Split(u.Path, "/") {
		cut(seg, 8) // a token; shorter ones are words
	}
	return s
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
		"QD_NOTIFICATION_ID=" + strconv.FormatInt(e.Notification, 10),
		"QD_TRY=" + strconv.Itoa(e.Try),
	}
	if e.ExitCode != nil {
		env = append(env, "QD_EXIT_CODE="+strconv.Itoa(*e.ExitCode))
	}
	return env
}
