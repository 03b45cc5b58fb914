package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/qd-run/qd/internal/testkit"
)

// curlAs sends a request with curl as user uid (-1: this process's) and
// returns its status.
func curlAs(t *testing.T, uid int, args ...string) int {
	t.Helper()
	curl, err := exec.LookPath("curl")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("no curl (.ci/run installs it)")
		}
		t.Skip("no curl")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, curl, append([]string{"-s", "-o", "/dev/null", "-w", "%{http_code}"}, args...)...)
	if uid >= 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
	}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("curl %v as %d: %v", args, uid, err)
	}
	code, _ := strconv.Atoi(string(out))
	return code
}

// Ensure `qd ui` run by an ordinary user (nobody) answers that user and
// root, as the kernel tells them, and refuses a third user, who gets in
// with the token from the file qd ui made in nobody's state directory
// (mode 0600, nobody's).
func TestUI_CommandOwnUser(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run qd ui as another user")
	}
	const nobody, third = 65534, 65533
	qd, db := testkit.MustQueue(t)
	testkit.MustQD(t, qd, db, "enqueue", "--lane", "own", "--agent", "w", `{}`)
	home := testkit.MustShortDir(t, "qd-nobody-")
	if err := os.Chown(home, nobody, nobody); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(home, "qd")
	mustCopy(t, qd, bin, nobody, nobody)
	state := filepath.Join(home, "state")
	addr := freePort(t)
	cmd := exec.Command(bin, "ui", "--listen", addr)
	cmd.Env = append(testkit.Environ(), "QD_DATABASE_URL="+db, "QD_CONFIG=/nonexistent/qd.hcl", "STATE_DIRECTORY="+state, "HOME="+home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody, Groups: []uint32{}}}
	out := &testkit.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	base := "http://" + addr
	testkit.Eventually(t, 15*time.Second, "qd ui to answer:\n"+out.String(), func() bool {
		resp, err := http.Get(base + "/static/qd.css")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})
	for _, c := range []struct {
		who  string
		uid  int
		want int
	}{{"its own user", nobody, http.StatusOK}, {"root", -1, http.StatusOK}, {"another user", third, http.StatusForbidden}} {
		if code := curlAs(t, c.uid, base+"/api/tasks?lane=own"); code != c.want {
			t.Errorf("%s: status %d, want %d", c.who, code, c.want)
		}
	}
	file := filepath.Join(state, "ui-token")
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatalf("token file: %v\n%s", err, out.String())
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o600 || st.Uid != nobody {
		t.Errorf("token file %s: mode %v, owner %d; want 0600 and nobody's", file, fi.Mode().Perm(), st.Uid)
	}
	tok, _ := os.ReadFile(file)
	if code := curlAs(t, third, "-H", "Authorization: Bearer "+strings.TrimSpace(string(tok)), base+"/api/tasks"); code != http.StatusOK {
		t.Errorf("another user with the token: status %d, want 200", code)
	}
	if !strings.Contains(out.String(), "(its token is in "+file+")") || strings.Contains(out.String(), strings.TrimSpace(string(tok))) {
		t.Errorf("qd ui's output, not a terminal, should name the token file and not the token:\n%s", out.String())
	}
}

// Ensure an agent's carriage returns and escape sequences cannot split the
// task page's event stream in a real browser: Chromium's EventSource on
// the page gets message events only, with no id, and the agent's text in
// them, and the page shows that text with visible escapes.
func TestUI_BrowserAgentText(t *testing.T) {
	chrome := browser(t)
	qd, db := testkit.MustQueue(t)
	id := testkit.MustQD(t, qd, db, "enqueue", "--lane", "cr", "--agent", "w", "--max-attempts", "1", `{}`)
	var claimed struct {
		RunID int64 `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(testkit.MustQD(t, qd, db, "claim", "--lane", "cr")), &claimed); err != nil {
		t.Fatal(err)
	}
	attack := "fine\revent: evil\rid: 666\rdata: injected\r\r\x1b[31mred"
	testkit.MustQD(t, qd, db, "fail", strconv.FormatInt(claimed.RunID, 10), "--summary", attack)
	u, _ := url.Parse(db)
	pool := testkit.MustPool(t)
	if _, err := pool.Exec(context.Background(), fmt.Sprintf(`UPDATE %s.runs SET output_tail = $1 WHERE id = $2`, u.Query().Get("schema")),
		"output "+attack+"\n", claimed.RunID); err != nil {
		t.Fatal(err)
	}
	addr := freePort(t)
	cmd := exec.Command(qd, "ui", "--listen", addr)
	cmd.Env = append(testkit.Environ(), "QD_DATABASE_URL="+db, "QD_CONFIG=/nonexistent/qd.hcl", "STATE_DIRECTORY="+t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	page := "http://" + addr + "/tasks/" + id
	testkit.Eventually(t, 10*time.Second, "qd ui to answer", func() bool {
		resp, err := http.Get(page)
		if err == nil {
			resp.Body.Close()
		}
		return err == nil
	})

	ctx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox)...)
	defer cancel()
	ctx, cancel = chromedp.NewContext(ctx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, chromedp.Navigate(page), chromedp.WaitVisible(chromedp.CSS("#conn.on"))); err != nil {
		t.Fatal(err)
	}
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`new Promise(function (done) {
		var seen = {types: [], ids: [], data: ""};
		var es = new EventSource(location.pathname);
		["evil", "injected", "data"].forEach(function (t) {
			es.addEventListener(t, function (e) { seen.types.push(t); seen.ids.push(e.lastEventId); });
		});
		es.onmessage = function (e) {
			seen.types.push("message"); seen.ids.push(e.lastEventId); seen.data = e.data;
			es.close(); done(JSON.stringify(seen));
		};
		setTimeout(function () { es.close(); done(JSON.stringify(seen)); }, 10000);
	})`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	var seen struct {
		Types []string `json:"types"`
		IDs   []string `json:"ids"`
		Data  string   `json:"data"`
	}
	if err := json.Unmarshal([]byte(got), &seen); err != nil {
		t.Fatal(err)
	}
	if len(seen.Types) != 1 || seen.Types[0] != "message" || seen.IDs[0] != "" {
		t.Errorf("Chromium's EventSource saw events %q with ids %q; want one message event and no id", seen.Types, seen.IDs)
	}
	want := `fine\revent: evil\rid: 666\rdata: injected\r\r\x1b[31mred`
	if !strings.Contains(seen.Data, want) {
		t.Errorf("the event lacks the agent's text with visible escapes %q: %.1500s", want, seen.Data)
	}
	text, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("#live .summary").textContent + "|" + document.querySelector("#live pre.output").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(text, want) != 2 {
		t.Errorf("the page does not show the summary and the output with visible escapes: %q", text)
	}
}
