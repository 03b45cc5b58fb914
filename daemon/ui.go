package daemon

import (
	"context"
	"fmt"
	"net"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/config"
	"github.com/qd-run/qd/supervisor"
	"github.com/qd-run/qd/ui"
)

// dashboard opens the listener of the config's ui block and returns the
// function that serves it until ctx ends; nil when there is no ui block.
func (d *daemon) dashboard(conf *config.Config) (func(ctx context.Context) error, error) {
	u := conf.UI
	if u == nil {
		return nil, nil
	}
	o, err := ui.OptionsFor(d.backend)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Pos(), err)
	}
	o.LogPath = supervisor.LogPath
	o.Listen, o.ReadOnly, o.Token, o.AllowedHosts = u.Listen, u.ReadOnly, u.Token, u.AllowedHosts
	o.Logger = d.logger.Named("ui")
	o.Metrics = d.Metrics()
	if o.Token == "" {
		o.LocalToken, o.TokenFile = localToken(o.Logger, conf.StateDir)
	}
	h, err := ui.New(o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Pos(), err)
	}
	ln, err := net.Listen("tcp", u.Listen)
	if err != nil {
		return nil, fmt.Errorf("%s: ui: listen on %s: %w", u.Pos(), u.Listen, err)
	}
	args := []any{"url", "http://" + ln.Addr().String() + "/", "read_only", u.ReadOnly}
	if o.TokenFile != "" {
		args = append(args, "token_file", o.TokenFile) // its path, never the token
	}
	d.logger.Info("dashboard listening", args...)
	return func(ctx context.Context) error { return h.Serve(ctx, ln) }, nil
}

// localToken returns the dashboard's local token and its file in
// stateDir (ui.LocalToken). When it cannot, it says why and returns
// none: the dashboard then answers only its own user and root.
func localToken(logger hclog.Logger, stateDir string) (token, path string) {
	token, path, err := ui.LocalToken(stateDir)
	if err != nil {
		logger.Warn("the dashboard has no local token: only its own user and root get in", "error", err)
		return "", ""
	}
	return token, path
}
