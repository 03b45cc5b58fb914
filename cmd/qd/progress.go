package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// viaSocket reports whether `qd heartbeat` should go to the daemon's socket:
// inside an agent run by `qd run`, QD_SOCKET is set and no database URL is
// given (children never get one).
func viaSocket(env *Env) (string, bool) {
	sock := env.Getenv("QD_SOCKET")
	if sock == "" || env.DatabaseURL != "" || env.Getenv("QD_DATABASE_URL") != "" {
		return "", false
	}
	return sock, true
}

// socketProgress tells the daemon at sock that the child of run id made
// progress: it counts as output for the agent's stall_timeout. The daemon
// keeps the lease itself.
func socketProgress(ctx context.Context, sock string, id int64) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	url := "http://qd/v1/runs/" + strconv.FormatInt(id, 10) + "/progress"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return fmt.Errorf("heartbeat run %d: %w", id, err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("heartbeat run %d through daemon socket %s: %w", id, sock, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	switch {
	case resp.StatusCode/100 == 2:
		return nil
	case resp.StatusCode == http.StatusNotFound:
		return &ExitError{Code: ExitLeaseLost, Err: fmt.Errorf("heartbeat run %d: the daemon at %s is not running it", id, sock)}
	}
	return errors.New("heartbeat run " + strconv.FormatInt(id, 10) + " through daemon socket " + sock + ": " +
		resp.Status + ": " + strings.TrimSpace(string(msg)))
}
