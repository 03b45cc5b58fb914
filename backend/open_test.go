package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/qd-run/qd/backend"
	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/pg"
)

// Ensure Open refuses each declined scheme with the same words, naming the
// backend that was declined and the decision record.
func TestOpen_Declined(t *testing.T) {
	tests := []struct{ url, want string }{
		{"redis://localhost:6379/0", "open queue: redis:// is not supported: Redis Streams was considered and declined as a backend; see docs/decisions/queue-backend.md"},
		{"rediss://localhost:6380/0", "open queue: rediss:// is not supported: Redis Streams was considered and declined as a backend; see docs/decisions/queue-backend.md"},
		{"durable://qd/lanes", "open queue: durable:// is not supported: Cloudflare Durable Objects was considered and declined as a backend; see docs/decisions/queue-backend.md"},
		{"DURABLES://qd/lanes", "open queue: durables:// is not supported: Cloudflare Durable Objects was considered and declined as a backend; see docs/decisions/queue-backend.md"},
	}
	for _, tt := range tests {
		p, err := backend.Open(context.Background(), tt.url, nil)
		if p != nil || err == nil || err.Error() != tt.want {
			t.Errorf("Open(%q) = %v, %v\nwant error %q", tt.url, p, err, tt.want)
		}
	}
	if !strings.HasSuffix(tests[0].want, backend.DecisionRecord) {
		t.Errorf("DecisionRecord = %q, not the path the refusals name", backend.DecisionRecord)
	}
}

// Ensure Open refuses an unknown scheme without showing the password, and a
// string without a scheme, by listing the supported schemes; the memory
// provider has none.
func TestOpen_Unknown(t *testing.T) {
	_, err := backend.Open(context.Background(), "mysql://x:pw@host/db", nil)
	if want := `open queue: unknown scheme "mysql" (supported: postgres://, postgresql://)`; err == nil || err.Error() != want {
		t.Errorf("mysql:// error = %v, want %q", err, want)
	}
	_, err = backend.Open(context.Background(), "no scheme here", nil)
	if want := `open queue: "no scheme here" is not a URL with a scheme (want postgres://, postgresql://)`; err == nil || err.Error() != want {
		t.Errorf("error for a string without scheme = %v, want %q", err, want)
	}
	for _, u := range []string{"memlease://", "memory://"} {
		if _, err := backend.Open(context.Background(), u, nil); err == nil || !strings.Contains(err.Error(), "unknown scheme") {
			t.Errorf("Open(%q) = %v, want unknown scheme: the memory provider is for tests only", u, err)
		}
	}
}

// Ensure Open reaches package pg for both of its schemes, with every
// ability of a backend filled in, and names the queue without its
// password.
func TestOpen_Postgres(t *testing.T) {
	u, schema := testkit.MustSchema(t)
	for _, scheme := range []string{"postgres", "postgresql"} {
		b, err := backend.Open(context.Background(), scheme+strings.TrimPrefix(u, "postgres"), nil)
		if err != nil {
			t.Fatalf("Open %s: %v", scheme, err)
		}
		p, ok := b.Provider.(*pg.Provider)
		if !ok || p.Schema() != schema {
			t.Errorf("Open %s: got %T, want *pg.Provider on schema %s", scheme, b.Provider, schema)
		}
		if b.Names == nil || b.Server == nil || b.Unserved == nil || b.Txs == nil || b.Dashboard == nil || b.Schema == nil {
			t.Errorf("Open %s: abilities missing: %+v", scheme, b)
		}
		if b.Schema.Schema() != schema {
			t.Errorf("Open %s: schema ability names %q, want %q", scheme, b.Schema.Schema(), schema)
		}
		b.Close()
	}
	b, err := backend.Open(context.Background(), "postgres://qd:s3cret@127.0.0.1:1/qd", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if strings.Contains(b.Where, "s3cret") || !strings.Contains(b.Where, "127.0.0.1:1/qd") {
		t.Errorf("Where = %q, want the URL without its password", b.Where)
	}
}
