package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Who may see and do what. With a token set (Options.Token) every request
// must carry it, as before. Without one the dashboard is on loopback, and
// loopback is not a boundary on a shared host: a request is served when
// the kernel says its connection was made by the dashboard's own user or
// root (peer.go), or when it carries the local token, the one kept in the
// state directory's ui-token file (LocalToken). Anyone else gets only
// /static/ and a 403 saying how to get in.

const tokenCookie = "qd_ui_token"

// LocalTokenFile is the name of the local token's file in the state
// directory.
const LocalTokenFile = "ui-token"

// LocalToken returns the dashboard's local token and the path of its file,
// state_dir/ui-token, making both at the first call: 32 random bytes in
// hex, in a file of mode 0600 created whole or not at all, so that
// dashboards racing for it agree on one token. A file that others may
// read, or that is not this user's, is refused: its token may be known.
func LocalToken(stateDir string) (token, path string, err error) {
	path = filepath.Join(stateDir, LocalTokenFile)
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", path, fmt.Errorf("make state directory for the dashboard's token: %w", err)
	}
	tok, err := readToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return tok, path, err
	}
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails
	tmp, err := os.CreateTemp(stateDir, LocalTokenFile+".*")
	if err != nil {
		return "", path, fmt.Errorf("make the dashboard's token: %w", err)
	}
	defer os.Remove(tmp.Name())
	_, werr := tmp.WriteString(hex.EncodeToString(b) + "\n")
	if err := errors.Join(werr, tmp.Sync(), tmp.Close()); err != nil {
		return "", path, fmt.Errorf("write the dashboard's token: %w", err)
	}
	// CreateTemp makes the file 0600; a link puts it in place only if
	// none is there yet, and the loser of a race reads the winner's.
	if err := os.Link(tmp.Name(), path); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", path, fmt.Errorf("make the dashboard's token: %w", err)
	}
	tok, err = readToken(path)
	return tok, path, err
}

// readToken reads the token of path, refusing a file others may read or
// another user owns.
func readToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 || (ok && int(st.Uid) != os.Geteuid()) {
		return "", fmt.Errorf("the dashboard's token file %s is not a file of this user's with mode 0600 (%s): its token may be known to others; remove it, and qd makes a new one", path, fi.Mode())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read the dashboard's token: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		return "", fmt.Errorf("the dashboard's token file %s holds no token; remove it, and qd makes a new one", path)
	}
	return tok, nil
}

// checkAccess lets a request through when it carries the token (the
// configured one, else the local one), when no token is configured and
// the kernel says its connection is the dashboard's own user's or
// root's, or when it asks for /static/. A GET with the token as ?token=
// sets it in a cookie and redirects to the same page without it.
func (s *server) checkAccess(next http.Handler) http.Handler {
	token := s.o.Token
	if token == "" {
		token = s.o.LocalToken
	}
	want := []byte(token)
	same := func(got string) bool { return token != "" && subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if t := r.URL.Query().Get("token"); r.Method == http.MethodGet && same(t) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: t, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			q := r.URL.Query()
			q.Del("token")
			u := *r.URL
			u.RawQuery = q.Encode()
			http.Redirect(w, r, u.RequestURI(), http.StatusSeeOther)
			return
		}
		_, pass, basic := r.BasicAuth()
		bearer, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		c, _ := r.Cookie(tokenCookie)
		switch {
		case (basic && same(pass)) || same(bearer) || (c != nil && same(c.Value)):
		case s.o.Token != "":
			w.Header().Set("WWW-Authenticate", `Basic realm="qd", charset="UTF-8"`)
			refuse(w, "the dashboard needs its token: as the password of basic auth, a bearer token, or ?token=", http.StatusUnauthorized)
			return
		case strings.HasPrefix(r.URL.Path, "/static/"):
		case s.ownUser(r):
		default:
			refuse(w, s.refusal(), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// ownUser reports whether the kernel says the request's connection was
// made by this process's user or by root.
func (s *server) ownUser(r *http.Request) bool {
	uid, err := peerOf(r).UID()
	if err != nil {
		s.o.Logger.Debug("cannot tell who made a connection", "remote", r.RemoteAddr, "error", err)
		return false
	}
	return uid == os.Geteuid() || uid == 0
}

// refusal says, in a line, why a request was refused and how to get in.
func (s *server) refusal() string {
	who := fmt.Sprintf("this dashboard answers without a token only its own user (uid %d) and root, as the kernel tells them", os.Geteuid())
	if !peerCheck {
		who = "this host cannot tell which user made a connection, so the dashboard answers only its token"
	}
	in := "give the dashboard a token (--token, or token in its ui block) to share it"
	if s.o.TokenFile != "" {
		in = fmt.Sprintf("open it with ?token= and the token in %s (readable by its user only), or %s", s.o.TokenFile, in)
	}
	return who + ": " + in
}
