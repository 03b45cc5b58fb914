package lease

import (
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
