package faults

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// mustSecretRole creates a login role with password pw that may use the
// rig's schema, and drops it when the test ends.
func (r *rig) mustSecretRole(pw string) string {
	r.t.Helper()
	role := fmt.Sprintf("qd_secret_test_%d", os.Getpid())
	r.exec(fmt.Sprintf(`DROP ROLE IF EXISTS %s`, role))
	r.exec(fmt.Sprintf(`CREATE ROLE %s LOGIN PASSWORD '%s'`, role, pw))
	for _, g := range []string{
		`GRANT USAGE ON SCHEMA %[2]s TO %[1]s`,
		`GRANT ALL ON ALL TABLES IN SCHEMA %[2]s TO %[1]s`,
		`GRANT ALL ON ALL SEQUENCES IN SCHEMA %[2]s TO %[1]s`,
		`GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %[2]s TO %[1]s`,
	} {
		r.exec(fmt.Sprintf(g, role, r.schema))
	}
	r.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = r.pool.Exec(ctx, fmt.Sprintf(`DROP OWNED BY %s`, role))
		_, _ = r.pool.Exec(ctx, fmt.Sprintf(`DROP ROLE IF EXISTS %s`, role))
	})
	return role
}

// Ensure a database password and a canary variable of the daemon's
// environment appear nowhere: not in the daemon's debug log (nor when the
// database cannot be reached), `qd status` in text and JSON, the agent's
// environment, or the command lines of qd and the agent.
func TestSecrets_NeverShown(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	stamp := strconv.FormatInt(time.Now().UnixNano(), 36)
	pw, canary := "pw-Canary-"+stamp, "env-Canary-"+stamp
	role := r.mustSecretRole(pw)
	u, _ := url.Parse(r.url)
	u.User = url.UserPassword(role, pw)
	secretURL := u.String()
	u.Host = "127.0.0.1:1" // nothing listens
	deadURL := u.String()
	env := []string{"QD_CANARY_SECRET=" + canary, "PGPASSWORD=" + pw, "DATABASE_URL=" + secretURL}
	id := r.enqueue("sec", "w", `{"mode":"env","ms":3000}`, 3)
	body := r.agentHCL(agentConf{name: "w"})
	d := r.daemon("secrets", body, testkit.DaemonOptions{Env: env}, secretURL)
	dead := r.daemon("secrets-dead", body, testkit.DaemonOptions{Env: env}, deadURL)
	run, apid := r.waitEvent("start", id, 20*time.Second)
	agentCmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", apid))
	places := map[string]string{"agent cmdline": string(agentCmdline)}
	for _, dm := range []*testkit.Daemon{d, dead} {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", dm.PID()))
		places[dm.Name+" cmdline"] = string(b)
		for _, args := range [][]string{{"status", "--socket", dm.Socket}, {"status", "--json", "--socket", dm.Socket}} {
			out, errOut, _ := testkit.QD(t, r.qd, r.url, args...)
			places[dm.Name+" "+strings.Join(args[:2], " ")] = out + errOut
		}
	}
	_, errOut, code := testkit.QD(t, r.qd, deadURL, "tasks")
	if code == 0 {
		t.Errorf("qd tasks against a dead port succeeded")
	}
	places["qd tasks error"] = errOut
	r.verify(expect{})
	envDump, err := os.ReadFile(filepath.Join(r.dir, "env."+strconv.FormatInt(run, 10)))
	if err != nil {
		t.Fatalf("agent environment dump: %v", err)
	}
	places["agent environment"] = string(envDump)
	places["daemon log"] = d.Log()
	places["unreachable daemon log"] = dead.Log()
	found := 0
	for where, text := range places {
		for _, secret := range []string{pw, canary} {
			if strings.Contains(text, secret) {
				found++
				t.Errorf("%s shows the secret %q", where, secret)
			}
		}
	}
	for _, v := range []string{"PGPASSWORD=", "DATABASE_URL=", "QD_DATABASE_URL=", "QD_CANARY_SECRET="} {
		if strings.Contains(string(envDump), "\n"+v) || strings.HasPrefix(string(envDump), v) {
			found++
			t.Errorf("agent environment holds %s", v)
		}
	}
	if !strings.Contains(dead.Log(), role) {
		t.Errorf("the unreachable daemon's log does not say which database it failed to reach:\n%s", dead.Log())
	}
	fig.add(func(f *figures) { f.secrets += found })
	fig.fault("secret-canary", 2)
}

// Ensure a webhook URL's password, user, path token and query appear
// nowhere qd writes them: not in the daemon's debug log, `qd show` and
// `qd status` (text and JSON), nor qd.notifications, even when the
// webhook's answer echoes its path. It is posted to all the same.
func TestSecrets_WebhookNeverShown(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	var posts atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if u, p, ok := req.BasicAuth(); ok && u == "qduser" && p == "Pa55wordCanary" && strings.Contains(req.URL.Path, "S3CRETT0KEN") {
			posts.Add(1)
		}
		http.Error(w, "no such hook: "+req.URL.String(), http.StatusNotFound)
	}))
	defer hook.Close()
	secrets := []string{"qduser", "Pa55wordCanary", "T000", "S3CRETT0KEN", "K3Ycanary"}
	secret := strings.Replace(hook.URL, "http://", "http://qduser:Pa55wordCanary@", 1) + "/hooks/T000/S3CRETT0KEN?key=K3Ycanary"
	body := fmt.Sprintf("webhook = %q\nnotify_backoff = \"1h\"\n", secret) +
		r.agentHCL(agentConf{name: "w", lanes: []string{"hook"}})
	d := r.daemon("secrets-hook", body, testkit.DaemonOptions{})
	id := r.enqueue("hook", "w", `{"mode":"crash"}`, 1)
	r.waitStates("", map[int64]string{id: "failed"}, 30*time.Second)
	testkit.Eventually(t, 20*time.Second, "the webhook posted to and its failure recorded", func() bool {
		var n int
		r.scalar(&n, `SELECT count(*) FROM {s}.notifications WHERE tries = 1 AND status = 'pending'`)
		return n == 1 && posts.Load() == 1
	})
	places := map[string]string{"daemon log": d.Log()}
	for _, args := range [][]string{{"show", strconv.FormatInt(id, 10)}, {"show", "--json", strconv.FormatInt(id, 10)},
		{"status", "--socket", d.Socket}, {"status", "--json", "--socket", d.Socket}} {
		out, errOut, _ := testkit.QD(t, r.qd, r.url, args...)
		places["qd "+strings.Join(args[:2], " ")] = out + errOut
	}
	var rows string
	r.scalar(&rows, `SELECT coalesce(string_agg(n::text, E'\n'), '') FROM {s}.notifications n`)
	places["qd.notifications"] = rows
	found := 0
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				found++
				t.Errorf("%s shows %q:\n%s", where, s, text)
			}
		}
	}
	if !strings.Contains(rows, strings.TrimPrefix(hook.URL, "http://")+"/… [") || !strings.Contains(rows, "404") {
		t.Errorf("qd.notifications lacks the webhook's host and answer:\n%s", rows)
	}
	fig.add(func(f *figures) { f.secrets += found })
	fig.fault("secret-canary", 1)
}
