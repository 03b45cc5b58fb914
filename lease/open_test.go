package lease_test

import (
	"context"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
)

// Ensure Redact hides passwords in URLs that parse, URLs that do not, and
// key=value connection strings, and leaves everything else readable.
func TestRedact(t *testing.T) {
	tests := []struct{ in, want string }{
		{"postgres://qd:s3cret@db:5432/qd", "postgres://qd:xxxxx@db:5432/qd"},
		{"postgres://qd@db/qd", "postgres://qd@db/qd"},
		{"postgres://qd:s3cret@db:99999999999/%zz", "postgres://qd:xxxxx@db:99999999999/%zz"},
		{"host=db user=qd password=s3cret dbname=qd", "host=db user=qd password=xxxxx dbname=qd"},
		{"host=db password = 's3 cret' dbname=qd", "host=db password = xxxxx dbname=qd"},
	}
	for _, tt := range tests {
		if got := lease.Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// Ensure Open refuses declined backends by naming the decision record, and
// unknown schemes by listing the supported ones.
func TestOpen_Schemes(t *testing.T) {
	lease.Register("testscheme", func(context.Context, string) (lease.Provider, error) { return nil, nil })
	_, err := lease.Open(context.Background(), "redis://localhost:6379/0")
	if err == nil || !strings.Contains(err.Error(), lease.DecisionRecord) {
		t.Errorf("redis:// error = %v, want one naming %s", err, lease.DecisionRecord)
	}
	_, err = lease.Open(context.Background(), "mysql://x:pw@host/db")
	if err == nil || !strings.Contains(err.Error(), "testscheme://") || strings.Contains(err.Error(), "pw") {
		t.Errorf("mysql:// error = %v, want the supported schemes and no password", err)
	}
	_, err = lease.Open(context.Background(), "no scheme here")
	if err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Errorf("error for a string without scheme = %v", err)
	}
}
