package ui_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
	"github.com/qd-run/qd/ui"
)

// nobody is the user the foreign-user tests act as.
const nobody = 65534

// MustCurl finds curl, the client the tests run as another user. It
// skips without root (only root may act as another user) or curl, except
// under CI, where curl must be there.
func MustCurl(tb testing.TB) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root, to send requests as user nobody")
	}
	path, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatal("no curl: the foreign-user tests must run under CI (.ci/run installs it)")
		}
		tb.Skip("no curl")
	}
	return path
}

// curlAs sends a request with curl as user uid (-1: this process's own)
// and returns the status and body. args are curl's, the URL among them.
func curlAs(tb testing.TB, curl string, uid int, args ...string) (int, string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, append([]string{"-sS", "-o", "-", "-w", "\n%{http_code}"}, args...)...)
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("curl %v as %d: %v\n%s", args, uid, err, out)
	}
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	code, _ := strconv.Atoi(s[i+1:])
	return code, s[:max(i, 0)]
}

// sameOrigin is what a browser adds to a form's POST on the page.
var sameOrigin = []string{"-H", "Sec-Fetch-Site: same-origin", "-H", "Accept: application/json"}

// Ensure another local user, refused by the daemon's socket, cannot use
// the tokenless loopback dashboard: as user nobody every page, JSON
// answer and action is refused 403 with a line saying how to get in, and
// nothing changes in the queue, while the static files still load. The
// same requests from this process's user are served, and nobody gets in
// with the local token from the state directory's file (mode 0600): as a
// bearer token, or from ?token=, which sets the cookie.
func TestUI_ForeignUser(t *testing.T) {
	curl := MustCurl(t)
	p, _ := MustProvider(t)
	MustEnqueueJSON(t, p, "sec", `{}`)
	stateDir := filepath.Join(t.TempDir(), "state")
	token, file, err := ui.LocalToken(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	base := MustServer(t, p, ui.Options{LocalToken: token, TokenFile: file})
	tasks := func() int {
		var n int
		if err := p.Pool().QueryRow(context.Background(), "SELECT count(*) FROM "+p.Schema()+".tasks").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := tasks()

	enqueue := []string{"-d", "agent=w&lane=sec&payload=" + `{"from":"nobody"}`, base + "/actions/enqueue"}
	for _, req := range [][]string{
		append(append([]string{}, sameOrigin...), enqueue...),
		append(append([]string{}, sameOrigin...), "-X", "POST", base+"/actions/lanes/sec/pause"),
		append(append([]string{}, sameOrigin...), "-d", "action=cancel&lane=sec", base+"/actions/bulk"),
		{base + "/"}, {base + "/api/tasks"}, {base + "/tasks/1"}, {"-H", "Accept: text/event-stream", base + "/tasks/1"},
		{base + "/metrics"}, {base + "/?token=wrong"},
	} {
		code, body := curlAs(t, curl, nobody, req...)
		if code != http.StatusForbidden || !strings.Contains(body, file) || strings.Count(strings.TrimSpace(body), "\n") > 0 {
			t.Errorf("as nobody, %v: status %d, %q; want 403 with one line naming %s", req, code, body, file)
		}
	}
	if got := tasks(); got != before || paused(t, p, "sec") {
		t.Errorf("requests of user nobody changed the queue: %d tasks (%d before), lane paused %v", got, before, paused(t, p, "sec"))
	}
	if code, _ := curlAs(t, curl, nobody, base+"/static/qd.css"); code != http.StatusOK {
		t.Errorf("as nobody, /static/qd.css: status %d, want 200", code)
	}

	if code, body := curlAs(t, curl, -1, base+"/api/overview"); code != http.StatusOK {
		t.Errorf("as this user: status %d, %.200s", code, body)
	}
	if code, body := curlAs(t, curl, nobody, append(append([]string{"-H", "Authorization: Bearer " + token}, sameOrigin...), enqueue...)...); code != http.StatusOK || tasks() != before+1 {
		t.Errorf("as nobody with the local token: status %d, %.200s; want the task enqueued", code, body)
	}
	jarDir := testkit.MustShortDir(t, "qd-jar-")
	if err := os.Chmod(jarDir, 0o777); err != nil {
		t.Fatal(err)
	}
	jar := filepath.Join(jarDir, "cookies")
	if code, _ := curlAs(t, curl, nobody, "-c", jar, base+"/tasks?token="+token); code != http.StatusSeeOther {
		t.Errorf("as nobody, ?token=: status %d, want a redirect that sets the cookie", code)
	}
	if code, body := curlAs(t, curl, nobody, "-b", jar, base+"/api/tasks"); code != http.StatusOK {
		t.Errorf("as nobody with the cookie: status %d, %.200s", code, body)
	}

	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file %s: %v, mode %v; want 0600", file, err, fi.Mode())
	}
}

// Ensure the kernel's word is read for an IPv6 socket reaching the IPv4
// address (curl connects to [::ffff:127.0.0.1] with one, listed in
// /proc/net/tcp6) and for IPv6 loopback: this user gets in, nobody not.
func TestUI_ForeignUserIPv6(t *testing.T) {
	curl := MustCurl(t)
	p, _ := MustProvider(t)
	v4 := MustServer(t, p, ui.Options{})
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(v4, "http://"))
	bases := []string{"http://[::ffff:127.0.0.1]:" + port}
	if ln, err := net.Listen("tcp", "[::1]:0"); err == nil {
		d, err := ui.New(ui.Options{Store: p, Listen: ln.Addr().String()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() { _ = d.Serve(ctx, ln) })
		defer wg.Wait()
		defer cancel()
		bases = append(bases, "http://"+ln.Addr().String())
	} else {
		t.Logf("no IPv6 loopback (%v): only the IPv4-mapped address is tried", err)
	}
	for _, base := range bases {
		if code, body := curlAs(t, curl, -1, base+"/api/overview"); code != http.StatusOK {
			t.Errorf("this user at %s: status %d, %.200s; want 200", base, code, body)
		}
		if code, _ := curlAs(t, curl, nobody, base+"/api/overview"); code != http.StatusForbidden {
			t.Errorf("nobody at %s: status %d, want 403", base, code)
		}
	}
}

// Ensure the local token is made once, mode 0600, and that dashboards
// starting at once agree on it; a token file others may read is refused.
func TestLocalToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	var wg sync.WaitGroup
	got := make([]string, 8)
	for i := range got {
		wg.Go(func() {
			tok, _, err := ui.LocalToken(dir)
			if err != nil {
				t.Error(err)
			}
			got[i] = tok
		})
	}
	wg.Wait()
	for _, tok := range got {
		if tok != got[0] || len(tok) != 64 {
			t.Fatalf("racing dashboards got different tokens: %q", got)
		}
	}
	again, path, err := ui.LocalToken(dir)
	if err != nil || again != got[0] {
		t.Errorf("a later start: %q, %v; want the same token", again, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("state directory holds %d files, want the token's alone", len(ents))
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ui.LocalToken(dir); err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Errorf("token file of mode 0644: %v; want a refusal saying to remove it", err)
	}
}
