package ui

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// DefaultListen is where the dashboard listens unless told otherwise.
const DefaultListen = "127.0.0.1:7780"

// ErrNeedsToken is returned by New and CheckListen for an address that is
// not loopback when no token is set.
var ErrNeedsToken = errors.New("the dashboard listens beyond this host only with a token")

// Options configure the dashboard.
type Options struct {
	Store Store
	// Daemons lists the daemons sharing the queue; nil when none can be
	// known (the overview then shows what the queue alone says).
	Daemons func(ctx context.Context) ([]Daemon, error)
	// LogPath is where a daemon with state directory dir writes run id's
	// output (supervisor.LogPath); nil shows only the stored tails.
	LogPath func(dir string, runID int64) string
	// Listen is the address served, host and port, for the Host check.
	Listen string
	// AllowedHosts are further names the Host header may carry.
	AllowedHosts []string
	// Token, when set, is required of every request: as a bearer token,
	// as the password of basic auth, or in the cookie ?token= sets.
	Token string
	// LocalToken, taken like Token when Token is empty, is the token of
	// TokenFile (LocalToken makes both): without it a request is served
	// only when the kernel says its connection is this user's or root's.
	LocalToken string
	TokenFile  string
	// Limits bound the clients (DefaultLimits where zero).
	Limits Limits
	// ReadOnly hides the actions and refuses them.
	ReadOnly bool
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Refresh is how often a live page looks for changes (1s when zero).
	Refresh time.Duration
	Logger  hclog.Logger
	// Hostname is this host's name, to tell which daemons' sockets and
	// run logs are here; os.Hostname when empty.
	Hostname string
}

// server is the dashboard's handler.
type server struct {
	o      Options
	limits Limits
	pages  map[string]*pageTemplate
	mux    *http.ServeMux
	// loads are the slots of Limits.Pages, streams of Limits.Streams.
	loads, streams slots
}

// Dashboard is the dashboard: an http.Handler, which Serve serves on a
// listener with its limits.
type Dashboard struct {
	h http.Handler
	s *server
}

func (d *Dashboard) ServeHTTP(w http.ResponseWriter, r *http.Request) { d.h.ServeHTTP(w, r) }

// New returns the dashboard. It refuses (ErrNeedsToken) a listen address
// that is not loopback when Token is empty.
func New(o Options) (*Dashboard, error) {
	if o.Store == nil {
		return nil, errors.New("ui: no store")
	}
	if err := CheckListen(o.Listen, o.Token); err != nil {
		return nil, err
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Hostname == "" {
		o.Hostname, _ = os.Hostname()
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	l := o.Limits.orDefault()
	s := &server{o: o, limits: l, pages: pages, mux: http.NewServeMux(),
		loads: make(slots, l.Pages), streams: make(slots, l.Streams)}
	s.routes()
	csrf := http.NewCrossOriginProtection()
	return &Dashboard{h: s.deadlines(s.checkHost(s.checkAccess(headers(csrf.Handler(s.mux))))), s: s}, nil
}

// CheckListen refuses (ErrNeedsToken) an address whose host is not a
// loopback address or localhost when token is empty.
func CheckListen(listen, token string) error {
	if token != "" || listen == "" {
		return nil
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return fmt.Errorf("ui: listen address %q: %w", listen, err)
	}
	if !loopback(host) {
		return fmt.Errorf("ui: %s is not a loopback address: %w", listen, ErrNeedsToken)
	}
	return nil
}

func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkHost refuses a request whose Host header names none of the
// dashboard's names: a page of another site that a DNS name rebound to
// this address must not read the dashboard.
func (s *server) checkHost(next http.Handler) http.Handler {
	listenHost, _, _ := net.SplitHostPort(s.o.Listen)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.Trim(host, "[]")
		ok := net.ParseIP(host) != nil || strings.EqualFold(host, "localhost") ||
			strings.EqualFold(host, listenHost) ||
			slices.ContainsFunc(s.o.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) })
		if !ok {
			refuse(w, fmt.Sprintf("host %q is not one of the dashboard's names; add it with --allow-host", host), http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// headers sets what every answer carries: no framing, no sniffing, and
// scripts only from the dashboard itself.
func headers(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func (s *server) routes() {
	static, _ := fs.Sub(staticFS, "static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if s.o.Metrics == nil {
			http.NotFound(w, r)
			return
		}
		s.load(w, r, loadTimeout, func(r *http.Request) { s.o.Metrics.ServeHTTP(w, r) })
	})
	for _, p := range []page{
		{path: "/{$}", api: "/api/overview", name: "overview", title: "Overview", load: s.overview},
		{path: "/tasks", api: "/api/tasks", name: "tasks", title: "Tasks", load: s.tasks},
		{path: "/tasks/{id}", api: "/api/tasks/{id}", name: "task", title: "Task", load: s.task},
		{path: "/timeline", api: "/api/timeline", name: "timeline", title: "Timeline", load: s.timeline},
		{path: "/throughput", api: "/api/throughput", name: "throughput", title: "Throughput", load: s.throughput},
		{path: "/actions", api: "/api/actions", name: "actions", title: "Actions", load: s.actionsPage},
	} {
		s.mux.Handle("GET "+p.path, s.serve(p, false))
		s.mux.Handle("GET "+p.api, s.serve(p, true))
	}
	s.mux.HandleFunc("GET /tasks/confirm", func(w http.ResponseWriter, r *http.Request) {
		s.load(w, r, 0, func(r *http.Request) { s.confirmBulk(w, r) })
	})
	s.action("POST /actions/enqueue", s.enqueue)
	s.action("POST /actions/run-now", s.runNow)
	s.action("POST /actions/tasks/{id}/cancel", s.cancel)
	s.action("POST /actions/tasks/{id}/retry", s.retry)
	s.action("POST /actions/lanes/{name}/pause", s.pause(true))
	s.action("POST /actions/lanes/{name}/resume", s.pause(false))
	s.action("POST /actions/agents/{name}/pause", s.pauseAgent(true))
	s.action("POST /actions/agents/{name}/resume", s.pauseAgent(false))
	s.action("POST /actions/bulk", s.bulk)
}

var urlPattern = regexp.MustCompile(`(?i)\b(postgres(ql)?|https?)://\S+`)

// scrub makes an error fit to show: any URL in it (a database URL with
// its password) becomes its redacted form without user or query, and a
// key=value password is hidden.
func scrub(err error) string {
	if err == nil {
		return ""
	}
	msg := urlPattern.ReplaceAllStringFunc(err.Error(), func(u string) string {
		scheme, _, _ := strings.Cut(u, "://")
		return scheme + "://…"
	})
	return lease.Redact(msg)
}
