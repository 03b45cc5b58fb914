package lease

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Opener opens a provider for a URL. Backends register one per scheme.
type Opener func(ctx context.Context, rawURL string) (Provider, error)

var (
	mu      sync.RWMutex
	openers = map[string]Opener{}
)

// declined names schemes whose backends were weighed and refused.
var declined = map[string]string{
	"redis":    "Redis Streams",
	"rediss":   "Redis Streams",
	"durable":  "Cloudflare Durable Objects",
	"durables": "Cloudflare Durable Objects",
}

// DecisionRecord is the repository path of the backend decision.
const DecisionRecord = "docs/decisions/queue-backend.md"

// Register makes a backend available to Open under scheme. Backends call it
// from init.
func Register(scheme string, open Opener) {
	mu.Lock()
	defer mu.Unlock()
	openers[scheme] = open
}

// Open picks the backend by the URL's scheme alone and opens it.
func Open(ctx context.Context, rawURL string) (Provider, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok || scheme == "" {
		return nil, fmt.Errorf("open queue: %q is not a URL with a scheme (want %s)", redact(rawURL), supported())
	}
	scheme = strings.ToLower(scheme)
	if name, ok := declined[scheme]; ok {
		return nil, fmt.Errorf("open queue: %s:// is not supported: %s was considered and declined as a backend; see %s", scheme, name, DecisionRecord)
	}
	mu.RLock()
	open := openers[scheme]
	mu.RUnlock()
	if open == nil {
		return nil, fmt.Errorf("open queue: unknown scheme %q (supported: %s)", scheme, supported())
	}
	return open(ctx, rawURL)
}

func supported() string {
	mu.RLock()
	defer mu.RUnlock()
	var s []string
	for k := range openers {
		s = append(s, k+"://")
	}
	sort.Strings(s)
	if len(s) == 0 {
		return "none registered"
	}
	return strings.Join(s, ", ")
}

var (
	userinfoPassword = regexp.MustCompile(`(://[^/@:]*:)[^@]*@`)
	keywordPassword  = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)
)

// redact hides a password in a URL (or a key=value connection string) so
// that errors can show it, even when the URL does not parse.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		s := userinfoPassword.ReplaceAllString(raw, "${1}xxxxx@")
		return keywordPassword.ReplaceAllString(s, "${1}xxxxx")
	}
	if _, ok := u.User.Password(); ok {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// Redact hides the password of a database URL for logs and errors.
func Redact(raw string) string { return redact(raw) }
