package daemon

import (
	"io"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/config"
)

// newLogger logs to out, which must never block (see logsink), in the
// config's level and format.
func newLogger(out io.Writer, conf *config.Config) hclog.Logger {
	return durationText{hclog.New(&hclog.LoggerOptions{
		Name:       "qd",
		Level:      hclog.LevelFromString(conf.LogLevel),
		JSONFormat: conf.LogFormat == "json",
		Output:     out,
	})}
}

// durationText is a logger that logs every time.Duration value as its text
// ("30s") before hclog sees it: hclog's JSON format would print it as a
// number of nanoseconds. Every logger it derives (Named, With) does the
// same, so each subsystem may log durations as they are.
type durationText struct{ hclog.Logger }

func (l durationText) Log(level hclog.Level, msg string, args ...any) {
	l.Logger.Log(level, msg, durationsAsText(args)...)
}

func (l durationText) Trace(msg string, args ...any) { l.Logger.Trace(msg, durationsAsText(args)...) }
func (l durationText) Debug(msg string, args ...any) { l.Logger.Debug(msg, durationsAsText(args)...) }
func (l durationText) Info(msg string, args ...any)  { l.Logger.Info(msg, durationsAsText(args)...) }
func (l durationText) Warn(msg string, args ...any)  { l.Logger.Warn(msg, durationsAsText(args)...) }
func (l durationText) Error(msg string, args ...any) { l.Logger.Error(msg, durationsAsText(args)...) }

func (l durationText) With(args ...any) hclog.Logger {
	return durationText{l.Logger.With(durationsAsText(args)...)}
}

func (l durationText) Named(name string) hclog.Logger { return durationText{l.Logger.Named(name)} }

func (l durationText) ResetNamed(name string) hclog.Logger {
	return durationText{l.Logger.ResetNamed(name)}
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
