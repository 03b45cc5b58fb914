package status

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// SnapshotFunc returns the daemon's current state. The server calls it once
// per request, from the request's goroutine, with a context that ends when
// the request is abandoned or its time is up.
//
// It must copy what it needs under whatever locks it takes and release
// them before returning, and must never wait on anything the heartbeat
// loop holds: a slow or stuck status client must not be able to delay a
// heartbeat. Database queries it makes should honour ctx.
type SnapshotFunc func(ctx context.Context) Snapshot

// Limits on one connection. Every one of them bounds a client that is slow
// or silent; none of them can hold anything the daemon needs.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 15 * time.Second
	idleTimeout       = 30 * time.Second
	maxHeaderBytes    = 8 << 10
	snapshotTimeout   = 10 * time.Second
)

// Server serves Snapshots over HTTP on a unix socket.
type Server struct {
	sock   *socket
	hs     *http.Server
	mux    *http.ServeMux
	snap   SnapshotFunc
	logger hclog.Logger

	mu    sync.Mutex
	fresh map[net.Conn]struct{} // accepted, no request byte read yet

	closeOnce sync.Once
	closeErr  error
}

// Listen binds the status socket at path and returns a Server ready to
// Serve. The parent directory is created with mode 0700 when missing (an
// existing one keeps its mode). The socket has mode 0600 from the first
// moment it exists. Listen fails, leaving everything in place, when another
// qd holds path+".lock" or answers on the socket, or when path is something
// other than a socket; a socket nobody answers on is stale and replaced.
func Listen(path string, snap SnapshotFunc, logger hclog.Logger) (*Server, error) {
	sock, err := bindSocket(path)
	if err != nil {
		return nil, err
	}
	s := &Server{sock: sock, snap: snap, logger: logger, fresh: map[net.Conn]struct{}{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/status", s.handleStatus)
	s.mux = mux
	s.hs = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ConnState:         s.trackConn,
		ErrorLog:          logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Debug}),
	}
	s.hs.RegisterOnShutdown(s.closeFresh)
	if sock.replaced {
		logger.Warn("replaced a stale status socket left by a daemon that did not shut down", "path", path)
	}
	logger.Info("status socket listening", "path", path)
	return s, nil
}

// Handle adds a handler for pattern (net/http ServeMux syntax, such as
// "POST /v1/runs/{id}/progress"). Call it before Serve.
func (s *Server) Handle(pattern string, h http.HandlerFunc) {
	s.mux.Handle(pattern, http.MaxBytesHandler(h, 64<<10))
}

// Path is the socket's path.
func (s *Server) Path() string { return s.sock.path }

// Serve answers requests until Shutdown; it then returns nil. It is the
// execute function of an oklog/run actor, with Shutdown as its interrupt.
func (s *Server) Serve() error {
	err := s.hs.Serve(s.sock.ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Shutdown stops accepting connections, closes those that have not sent a
// request, and waits for requests in progress until ctx ends, then closes
// whatever is left. It removes the socket if the file at its path is still
// the one Listen created, and releases the lock. It is safe to call more
// than once, and before Serve. It returns ctx's error when it had to close
// requests still in progress.
func (s *Server) Shutdown(ctx context.Context) error {
	s.closeOnce.Do(func() {
		var forced error
		if err := s.hs.Shutdown(ctx); err != nil {
			s.logger.Warn("status socket: requests still running at shutdown, closing them", "error", err)
			s.hs.Close()
			forced = fmt.Errorf("shut down status socket: %w", err)
		}
		s.closeErr = errors.Join(forced, s.sock.Close())
	})
	return s.closeErr
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), snapshotTimeout)
	defer cancel()
	snap := s.snap(ctx)
	normalize(&snap)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(snap); err != nil {
		s.logger.Debug("status socket: write response", "error", err)
	}
}

// normalize makes empty lists encode as [] rather than null, so clients can
// iterate without a nil check.
func normalize(s *Snapshot) {
	if s.Agents == nil {
		s.Agents = []AgentStatus{}
	}
	if s.Runs == nil {
		s.Runs = []RunStatus{}
	}
	if s.Lanes == nil {
		s.Lanes = []LaneStatus{}
	}
}

// trackConn remembers connections that have not sent a byte, so Shutdown
// can close them at once rather than wait for them to time out.
func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if state == http.StateNew {
		s.fresh[c] = struct{}{}
		return
	}
	delete(s.fresh, c)
}

func (s *Server) closeFresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.fresh {
		c.Close()
		delete(s.fresh, c)
	}
}
