package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
)

// ErrNotRunning is matched (errors.Is) by Fetch's error when nothing
// listens on the socket.
var ErrNotRunning = errors.New("qd daemon is not running")

// maxResponseBytes caps what Fetch reads, far above any real snapshot.
const maxResponseBytes = 16 << 20

// NotRunningError says no daemon answers at Path; Err is the connect error.
type NotRunningError struct {
	Path string
	Err  error
}

func (e *NotRunningError) Error() string {
	return fmt.Sprintf("no qd daemon is answering at %s (connect: %v); is `qd run` running?", e.Path, e.Err)
}

func (e *NotRunningError) Is(target error) bool { return target == ErrNotRunning }
func (e *NotRunningError) Unwrap() error        { return e.Err }

// Fetch asks the daemon listening at path for its Snapshot.
func Fetch(ctx context.Context, path string) (*Snapshot, error) {
	if err := checkSocketPath(path, 0); err != nil {
		return nil, err
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://qd/v1/status", nil)
	if err != nil {
		return nil, fmt.Errorf("build status request: %w", err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, dialError(path, err)
	}
	defer resp.Body.Close()
	body := io.LimitReader(resp.Body, maxResponseBytes)
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(body, 512))
		return nil, fmt.Errorf("fetch status from %s: %s: %s", path, resp.Status, strings.TrimSpace(string(msg)))
	}
	var snap Snapshot
	if err := json.NewDecoder(body).Decode(&snap); err != nil {
		return nil, fmt.Errorf("decode status from %s: %w", path, err)
	}
	return &snap, nil
}

// dialError turns "nothing there" and "nothing listening" into a
// NotRunningError and names the socket in every other failure.
func dialError(path string, err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		var errno syscall.Errno
		if errors.As(op.Err, &errno) && (errno == syscall.ENOENT || errno == syscall.ECONNREFUSED) {
			return &NotRunningError{Path: path, Err: errno}
		}
		return fmt.Errorf("connect to qd status socket %s: %w", path, op.Err)
	}
	return fmt.Errorf("fetch status from %s: %w", path, err)
}
