package ui

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Limits bound what the dashboard's clients may hold at once, and for how
// long. A zero field takes its value from DefaultLimits.
type Limits struct {
	// Conns is how many connections may be open at once; past it, new
	// ones wait in the kernel's queue until one closes.
	Conns int
	// Pages is how many page loads, JSON answers, actions and live
	// pushes may read the queue at once; a request that finds them all
	// taken for Wait is answered 503.
	Pages int
	// Streams is how many live streams may be open at once; one more is
	// answered 503.
	Streams int
	// Wait is how long a request waits for one of Pages.
	Wait time.Duration
	// ReadHeader is how long a client may take to send a request's
	// headers, Read the whole request with its body, Write to take an
	// answer (or one push of a live stream), and Idle is how long a
	// kept-alive connection may wait for its next request.
	ReadHeader, Read, Write, Idle time.Duration
	// Body is the largest request body taken, in bytes.
	Body int64
}

// DefaultLimits are the dashboard's limits unless Options.Limits says
// otherwise.
var DefaultLimits = Limits{
	Conns: 128, Pages: 8, Streams: 32, Wait: 2 * time.Second,
	ReadHeader: 5 * time.Second, Read: 20 * time.Second, Write: 20 * time.Second, Idle: 30 * time.Second,
	Body: 2 << 20,
}

// orDefault fills l's zero fields from DefaultLimits.
func (l Limits) orDefault() Limits {
	d := DefaultLimits
	fill(&l.Conns, d.Conns)
	fill(&l.Pages, d.Pages)
	fill(&l.Streams, d.Streams)
	fill(&l.Wait, d.Wait)
	fill(&l.ReadHeader, d.ReadHeader)
	fill(&l.Read, d.Read)
	fill(&l.Write, d.Write)
	fill(&l.Idle, d.Idle)
	fill(&l.Body, d.Body)
	return l
}

func fill[T int | int64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}

// Serve answers the dashboard on ln until ctx ends, with its limits: at
// most Limits.Conns connections, and the read, write and idle timeouts.
// Then it closes the live streams and waits up to two seconds for the
// other requests to finish.
func (d *Dashboard) Serve(ctx context.Context, ln net.Listener) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	l := d.s.limits
	srv := &http.Server{
		Handler:           d,
		ReadHeaderTimeout: l.ReadHeader,
		// The read timeout covers a request and its body; a live stream
		// lifts it, and every answer has a write deadline of its own
		// (deadlines), which a stream pushes on at each event.
		ReadTimeout:    l.Read,
		IdleTimeout:    l.Idle,
		MaxHeaderBytes: 64 << 10,
		BaseContext:    func(net.Listener) context.Context { return base },
		ConnContext:    connContext,
		ErrorLog:       d.s.o.Logger.StandardLogger(&hclog.StandardLoggerOptions{ForceLevel: hclog.Warn}),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(limitListener(ln, l.Conns)) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	cancel() // ends the event streams, which never end on their own
	sctx, stop := context.WithTimeout(context.Background(), 2*time.Second)
	defer stop()
	err := srv.Shutdown(sctx)
	if e := <-done; !errors.Is(e, http.ErrServerClosed) && e != nil {
		return e
	}
	return err
}

// deadlines gives every answer a write deadline, so that a client that
// never reads cannot hold a handler, and caps every request's body.
func (s *server) deadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.limits.Write))
		r.Body = http.MaxBytesReader(w, r.Body, s.limits.Body)
		next.ServeHTTP(w, r)
	})
}

// limited is a listener that holds at most n connections open at once.
type limited struct {
	net.Listener
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

// limitListener returns ln holding at most n connections open at once:
// past that, Accept waits until one closes, and the clients wait in the
// kernel's queue, costing this process no descriptor.
func limitListener(ln net.Listener, n int) net.Listener {
	return &limited{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

func (l *limited) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &limitedConn{Conn: c, release: sync.OnceFunc(func() { <-l.slots })}, nil
}

func (l *limited) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// limitedConn gives its slot back when it closes.
type limitedConn struct {
	net.Conn
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// slots is a counting semaphore that says when it is full.
type slots chan struct{}

// take takes a slot, waiting up to wait (or until ctx ends); it reports
// whether it got one.
func (s slots) take(ctx context.Context, wait time.Duration) bool {
	select {
	case s <- struct{}{}:
		return true
	default:
	}
	if wait <= 0 {
		return false
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case s <- struct{}{}:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

func (s slots) give() { <-s }

// busy answers 503 with a Retry-After of retry seconds.
func busy(w http.ResponseWriter, retry string, msg string) {
	w.Header().Set("Retry-After", retry)
	refuse(w, msg, http.StatusServiceUnavailable)
}

// refuse answers code with msg and closes the connection after it, so a
// refused client's unread body (trickled, perhaps) holds no connection.
func refuse(w http.ResponseWriter, msg string, code int) {
	w.Header().Set("Connection", "close")
	http.Error(w, msg, code)
}
