package lease_test

import (
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
