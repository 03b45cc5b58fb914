package lease_test

import (
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

// Ensure RedactWebhook keeps only the scheme and host of a webhook URL,
// hiding its password, user, path token and query, and gives two URLs on
// one host different fingerprints.
func TestRedactWebhook(t *testing.T) {
	secret := "https://user:pass@hooks.example.com:8443/hooks/T000/SECRET?key=x"
	got := lease.RedactWebhook(secret)
	for _, part := range []string{"user", "pass", "T000", "SECRET", "key", "x"} {
		if strings.Contains(strings.TrimPrefix(got, "https://hooks.example.com:8443"), part) {
			t.Errorf("RedactWebhook(%q) = %q shows %q", secret, got, part)
		}
	}
	if !strings.HasPrefix(got, "https://hooks.example.com:8443/… [") {
		t.Errorf("RedactWebhook(%q) = %q, want the scheme and host, then …", secret, got)
	}
	other := lease.RedactWebhook("https://hooks.example.com:8443/hooks/T000/OTHER")
	if other == got || other[:len(other)-10] != got[:len(got)-10] {
		t.Errorf("two webhooks on one host: %q and %q, want the same text and another fingerprint", got, other)
	}
	if got := lease.RedactWebhook("http://127.0.0.1:9/"); !strings.HasPrefix(got, "http://127.0.0.1:9 [") {
		t.Errorf("a URL with nothing secret: %q", got)
	}
	if got := lease.RedactWebhook("%zz://a:b@c"); strings.Contains(got, "a:b") {
		t.Errorf("a URL that does not parse: %q", got)
	}
}
