package ui_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
	"github.com/qd-run/qd/ui"
)

// password is put in the database URL of every test's provider; no page,
// JSON or error may show it.
const password = "Sup3rSecretPw"

// MustProvider opens a provider on a fresh migrated schema, through a URL
// that carries password (the test server trusts local connections, so it
// is never checked, only carried).
func MustProvider(tb testing.TB) (*pg.Provider, string) {
	tb.Helper()
	u, _ := testkit.MustSchema(tb)
	parsed, err := url.Parse(u)
	if err != nil {
		tb.Fatal(err)
	}
	parsed.User = url.UserPassword(parsed.User.Username(), password)
	u = parsed.String()
	p, err := pg.Open(context.Background(), u, hclog.NewNullLogger())
	if err != nil {
		tb.Fatalf("pg.Open: %v", err)
	}
	tb.Cleanup(p.Close)
	if err := p.Migrate(context.Background()); err != nil {
		tb.Fatalf("migrate: %v", err)
	}
	return p, u
}

// MustServer serves the dashboard over p with o (Store, Listen and
// Refresh filled in) on a loopback port, as qd ui does, and returns its
// base URL.
func MustServer(tb testing.TB, p *pg.Provider, o ui.Options) string {
	tb.Helper()
	_, base := MustDashboard(tb, p, o)
	return base
}

// MustDashboard is MustServer, returning the dashboard too.
func MustDashboard(tb testing.TB, p *pg.Provider, o ui.Options) (*ui.Dashboard, string) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	o.Store = p.Dashboard()
	o.Listen = ln.Addr().String()
	if o.Daemons == nil {
		// The daemons as qd ui and a daemon's ui block list them.
		d, err := ui.OptionsFor(&lease.Backend{Provider: p, Names: p, Dashboard: p.Dashboard()})
		if err != nil {
			tb.Fatal(err)
		}
		o.Daemons = d.Daemons
	}
	if o.Refresh == 0 {
		o.Refresh = 200 * time.Millisecond
	}
	d, err := ui.New(o)
	if err != nil {
		tb.Fatalf("ui.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	return d, "http://" + ln.Addr().String()
}

// MustGet fetches base+path and returns the status and body.
func MustGet(tb testing.TB, base, path string, header ...string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodGet, base+path, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return MustDo(tb, req)
}

// MustPost posts form to base+path as a same-origin form would.
func MustPost(tb testing.TB, base, path string, form url.Values, header ...string) (int, string) {
	tb.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(form.Encode()))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return MustDo(tb, req)
}

func MustDo(tb testing.TB, req *http.Request) (int, string) {
	tb.Helper()
	c := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// MustFinish claims a task of lane and settles it with outcome, summary
// and output.
func MustFinish(tb testing.TB, p *pg.Provider, lane string, outcome lease.RunState, summary, output string) *lease.Lease {
	tb.Helper()
	ctx := context.Background()
	l, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{lane}, Owner: "tester"})
	if err != nil {
		tb.Fatalf("claim %s: %v", lane, err)
	}
	code := 0
	if outcome != lease.RunCompleted {
		code = 3
	}
	if _, err := p.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: outcome, Summary: summary,
		OutputTail: output, ExitCode: &code, RetryIn: time.Hour}); err != nil {
		tb.Fatalf("settle: %v", err)
	}
	return l
}

// openUnmigrated opens a provider on u without checking it answers.
func openUnmigrated(u string) (*pg.Provider, error) {
	return pg.Open(context.Background(), u, hclog.NewNullLogger())
}
