package backend

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/go-hclog"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
)

// DecisionRecord is the repository path of the backend decision.
const DecisionRecord = "docs/decisions/queue-backend.md"

// supported lists the schemes Open accepts, for its errors.
const supported = "postgres://, postgresql://"

// declined names the backends of the schemes that were weighed and refused.
var declined = map[string]string{
	"redis":    "Redis Streams",
	"rediss":   "Redis Streams",
	"durable":  "Cloudflare Durable Objects",
	"durables": "Cloudflare Durable Objects",
}

// Open opens the backend that the scheme of rawURL names, and nothing else
// of the URL: postgres:// and postgresql:// open package pg. A declined
// scheme is refused with an error naming DecisionRecord, and an unknown one
// with the list of supported schemes; every command that takes a URL says
// so in these words. The Backend it returns holds the provider and every
// ability of its backend, filled here once (pg has them all); logger
// receives the backend's own log (a nil one discards it). Close it with
// its Close.
func Open(ctx context.Context, rawURL string, logger hclog.Logger) (*lease.Backend, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("open queue: %q is not a URL with a scheme (want %s)", lease.Redact(rawURL), supported)
	}
	scheme = strings.ToLower(scheme)
	switch scheme {
	case "postgres", "postgresql":
		p, err := pg.Open(ctx, rawURL, logger)
		if err != nil {
			return nil, fmt.Errorf("open queue: %w", err)
		}
		return &lease.Backend{Provider: p, Where: lease.Redact(rawURL),
			Names: p, Server: p, Unserved: p, Txs: p, Dashboard: p.Dashboard(), Schema: p}, nil
	}
	if name, ok := declined[scheme]; ok {
		return nil, fmt.Errorf("open queue: %s:// is not supported: %s was considered and declined as a backend; see %s", scheme, name, DecisionRecord)
	}
	return nil, fmt.Errorf("open queue: unknown scheme %q (supported: %s)", scheme, supported)
}

// SchemaVersion is the version of the queue schema this build writes and
// needs (docs/database.md, "Upgrading").
func SchemaVersion() int { return pg.LatestVersion() }
