package daemon

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/lease"
)

// newLogger logs to out, which must never block (see logsink), in the
// config's level and format, with durations as text and a database out of
// reach said once, then every outageEvery (outage).
func newLogger(out io.Writer, conf *config.Config) hclog.Logger {
	root := hclog.New(&hclog.LoggerOptions{
		Name:       "qd",
		Level:      hclog.LevelFromString(conf.LogLevel),
		JSONFormat: conf.LogFormat == "json",
		Output:     out,
	})
	return daemonLog{Logger: root, outage: &outage{logger: root}}
}

// daemonLog is the daemon's logger. It logs every time.Duration value as
// its text ("30s") before hclog sees it (hclog's JSON format would print
// it as a number of nanoseconds), and hands every warning or error whose
// error says the database is out of reach (lease.ErrUnreachable) to
// outage, which lets the first through and holds the rest back. Every
// logger it derives (Named, With) does the same, so each subsystem logs as
// it likes.
type daemonLog struct {
	hclog.Logger
	outage *outage
}

func (l daemonLog) Log(level hclog.Level, msg string, args ...any) {
	if level >= hclog.Warn {
		var ok bool
		if args, ok = l.outage.admit(args); !ok {
			return
		}
	}
	l.Logger.Log(level, msg, durationsAsText(args)...)
}

func (l daemonLog) Trace(msg string, args ...any) { l.Logger.Trace(msg, durationsAsText(args)...) }
func (l daemonLog) Debug(msg string, args ...any) { l.Logger.Debug(msg, durationsAsText(args)...) }
func (l daemonLog) Info(msg string, args ...any)  { l.Logger.Info(msg, durationsAsText(args)...) }
func (l daemonLog) Warn(msg string, args ...any)  { l.Log(hclog.Warn, msg, args...) }
func (l daemonLog) Error(msg string, args ...any) { l.Log(hclog.Error, msg, args...) }

func (l daemonLog) With(args ...any) hclog.Logger {
	return daemonLog{l.Logger.With(durationsAsText(args)...), l.outage}
}

func (l daemonLog) Named(name string) hclog.Logger {
	return daemonLog{l.Logger.Named(name), l.outage}
}

func (l daemonLog) ResetNamed(name string) hclog.Logger {
	return daemonLog{l.Logger.ResetNamed(name), l.outage}
}

// outageEvery is how often a database out of reach is said again.
const outageEvery = 30 * time.Second

// outage keeps the log of a database out of reach to one line when it
// goes, one every outageEvery while it stays away (each claim, heartbeat,
// settlement and renewal fails meanwhile, several times a second), and one
// when it answers again, each saying how many lines were held back.
type outage struct {
	logger hclog.Logger // for its own lines

	mu    sync.Mutex
	since time.Time // zero while the database answers
	last  time.Time // when a line about it was last let through
	held  int       // lines held back since
}

// admit says whether a line with args is logged, and with what: a line
// whose error is not lease.ErrUnreachable always is, as it is; the first
// of an outage too, and then one every outageEvery, with how long it has
// lasted and how many lines were held back.
func (o *outage) admit(args []any) ([]any, bool) {
	if !unreachableIn(args) {
		return args, true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	switch {
	case o.since.IsZero():
		o.since, o.last, o.held = now, now, 0
		return append(slices.Clip(args), "note", fmt.Sprintf("the database is out of reach; this is said again every %s while it stays so", outageEvery)), true
	case now.Sub(o.last) >= outageEvery:
		held := o.held
		o.last, o.held = now, 0
		return append(slices.Clip(args), "unreachable_for", now.Sub(o.since).Round(time.Second).String(), "lines_held_back", held), true
	}
	o.held++
	return nil, false
}

// reachable is told that a call to the database succeeded; it ends an
// outage, saying so.
func (o *outage) reachable() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.since.IsZero() {
		return
	}
	o.logger.Info("the database answers again", "unreachable_for", time.Since(o.since).Round(time.Second).String(), "lines_held_back", o.held)
	o.since, o.held = time.Time{}, 0
}

// unreachableIn reports whether the key-value pairs args hold an error
// that says the database is out of reach.
func unreachableIn(args []any) bool {
	for i := 1; i < len(args); i += 2 {
		if err, ok := args[i].(error); ok && errors.Is(err, lease.ErrUnreachable) {
			return true
		}
	}
	return false
}

// outageOf is the outage of the daemon's logger, nil for another.
func outageOf(l hclog.Logger) *outage {
	if d, ok := l.(daemonLog); ok {
		return d.outage
	}
	return nil
}

// durationsAsText returns the key-value pairs args with each duration value
// replaced by its String; args itself is not changed.
func durationsAsText(args []any) []any {
	out, cloned := args, false
	for i := 1; i < len(args); i += 2 {
		if d, ok := args[i].(time.Duration); ok {
			if !cloned {
				out, cloned = slices.Clone(args), true
			}
			out[i] = d.String()
		}
	}
	return out
}
