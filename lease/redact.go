package lease

import (
	"crypto/sha256"
	"encoding/hex"
	"net/url"
	"regexp"
)

var (
	userinfoPassword = regexp.MustCompile(`(://[^/@:]*:)[^@]*@`)
	keywordPassword  = regexp.MustCompile(`(?i)(password\s*=\s*)('[^']*'|\S+)`)
)

// Redact hides the password of a database URL (or of a key=value connection
// string) so that logs and errors can show it, even when the URL does not
// parse.
func Redact(raw string) string {
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

// RedactWebhook is how a webhook URL is shown, logged and recorded: its
// scheme and host, everything else (user and password, path, query)
// replaced by "…", and the first 8 hex digits of the SHA-256 of the whole
// URL, so that two webhooks on one host can be told apart:
// "https://hooks.example.com/… [3f9a01c2]". The full URL stays in the
// config and the request.
func RedactWebhook(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	fp := " [" + hex.EncodeToString(sum[:4]) + "]"
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return "webhook…" + fp
	}
	s := u.Scheme + "://" + u.Host
	if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		s += "/…"
	}
	return s + fp
}
