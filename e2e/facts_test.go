package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/qd-run/qd/internal/testkit"
)

// keySets gathers the fields each fact has in each place qd prints it and
// reports the places that disagree with the first.
type keySets struct {
	t     *testing.T
	first map[string][]string // by fact: the first keys seen
	where map[string]string   // by fact: where they were seen
	seen  map[string][]string // by fact: every place that printed it
}

func newKeySets(t *testing.T) *keySets {
	return &keySets{t: t, first: map[string][]string{}, where: map[string]string{}, seen: map[string][]string{}}
}

// add records the keys of each object of fact printed at place.
func (k *keySets) add(fact, place string, objects ...any) {
	k.t.Helper()
	for _, o := range objects {
		m, ok := o.(map[string]any)
		if !ok {
			k.t.Errorf("%s in %s is %T, not an object: %v", fact, place, o, o)
			continue
		}
		var keys []string
		for key := range m {
			keys = append(keys, key)
		}
		slices.Sort(keys)
		if !slices.Contains(k.seen[fact], place) {
			k.seen[fact] = append(k.seen[fact], place)
		}
		want, ok := k.first[fact]
		if !ok {
			k.first[fact], k.where[fact] = keys, place
			continue
		}
		var diff []string
		if missing := differ(want, keys); len(missing) > 0 {
			diff = append(diff, fmt.Sprintf("lacks %v", missing))
		}
		if extra := differ(keys, want); len(extra) > 0 {
			diff = append(diff, fmt.Sprintf("has %v besides", extra))
		}
		if len(diff) > 0 {
			k.t.Errorf("a %s in %s %s, compared with one in %s", fact, place, strings.Join(diff, " and "), k.where[fact])
		}
	}
}

// differ lists what a has and b lacks.
func differ(a, b []string) []string {
	var out []string
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// MustJSON decodes text as JSON.
func MustJSON(t *testing.T, what, text string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(text), &v); err != nil {
		t.Fatalf("%s: %v\n%.2000s", what, err, text)
	}
	return v
}

// field is v's field name (v an object), or a list: the items of v's
// field when it is a list, v's field alone otherwise, none when null.
func field(v any, name string) []any {
	m, _ := v.(map[string]any)
	switch f := m[name].(type) {
	case nil:
		return nil
	case []any:
		return f
	default:
		return []any{f}
	}
}

// Ensure a task, a run, a run in flight, a lane, a periodic schedule and
// an agent's last outcome have the same fields wherever qd prints them,
// read from a real daemon serving its dashboard: qd show, qd tasks, qd
// runs, qd lane list and qd status, the socket read raw, and the
// dashboard's /api/tasks, /api/tasks/ID and /api/overview. The tasks span
// what may be missing (running, failed, queued with a key, claimed by a
// script without a pid), so a field left out for want of a value shows.
func TestFacts_SameKeysEverywhere(t *testing.T) {
	qd, db := testkit.MustQueue(t)
	dir := t.TempDir()
	long := testkit.MustScript(t, dir, "long.sh", "echo started\nexec sleep 300\n")
	quick := testkit.MustScript(t, dir, "quick.sh", "echo trying\necho no luck >&2\nexit 3\n")
	addr := freePort(t)
	d := testkit.StartDaemon(t, qd, db, "facts", fmt.Sprintf(`
agent "long" {
  command  = [%q]
  schedule = "@every 1s"
  lanes    = ["long"]
}
agent "quick" {
  command      = [%q]
  schedule     = "@every 1s"
  lanes        = ["quick"]
  max_attempts = 1
}
periodic "nightly" {
  schedule = "0 3 * * *"
  agent    = "quick"
  lane     = "quick"
}
ui {
  listen = %q
}`, long, quick, addr), testkit.DaemonOptions{})
	t.Cleanup(func() { // a drain stops the long run's process group
		d.Signal(syscall.SIGTERM)
		d.Wait(t, 40*time.Second)
	})
	ids := []string{
		enqueue(t, qd, db, "long", "long"),
		enqueue(t, qd, db, "quick", "quick", "--max-attempts", "1"),
		enqueue(t, qd, db, "later", "nobody", "--key", "k-1", "--in", "1h", "--priority", "-3"),
		enqueue(t, qd, db, "script", "script"),
	}
	testkit.MustQD(t, qd, db, "claim", "--lane", "script", "--owner", "a-script")
	waitShow(t, qd, db, ids[1], 30*time.Second, "the quick task to fail", func(s shown) bool { return s.Task.State == "failed" })
	socket := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.Socket)
	}}}
	get := func(c *http.Client, url string) string {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		body := readAll(resp)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
		}
		return body
	}
	base := "http://" + addr
	var status, overview any
	testkit.Eventually(t, 30*time.Second, "the long run in flight on the socket and both runs on the overview", func() bool {
		status = MustJSON(t, "GET /v1/status", get(socket, "http://qd/v1/status"))
		resp, err := http.Get(base + "/api/overview")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		overview = MustJSON(t, "GET /api/overview", readAll(resp))
		reachable := false
		for _, dm := range field(overview, "daemons") {
			m, _ := dm.(map[string]any)
			reachable = reachable || m["socket_reachable"] == true
		}
		return len(field(status, "runs")) == 1 && len(field(overview, "runs")) == 2 && reachable
	})

	k := newKeySets(t)
	for _, id := range ids {
		show := MustJSON(t, "qd show "+id, testkit.MustQD(t, qd, db, "show", id, "--json"))
		k.add("task", "qd show --json", field(show, "task")...)
		k.add("run", "qd show --json", field(show, "runs")...)
		page := MustJSON(t, "GET /api/tasks/"+id, get(http.DefaultClient, base+"/api/tasks/"+id))
		k.add("task", "/api/tasks/ID", field(page, "task")...)
		k.add("run", "/api/tasks/ID", field(page, "runs")...)
	}
	tasks := MustJSON(t, "qd tasks", testkit.MustQD(t, qd, db, "tasks", "--json"))
	k.add("task", "qd tasks --json", tasks.([]any)...)
	k.add("task", "/api/tasks", field(MustJSON(t, "GET /api/tasks", get(http.DefaultClient, base+"/api/tasks")), "tasks")...)
	k.add("task", "/api/overview recent_tasks", field(overview, "recent_tasks")...)
	runs := MustJSON(t, "qd runs", testkit.MustQD(t, qd, db, "runs", "--json"))
	k.add("run", "qd runs --json", runs.([]any)...)

	cli := MustJSON(t, "qd status", testkit.MustQD(t, qd, db, "status", "--socket", d.Socket, "--json"))
	for _, src := range []struct {
		place string
		v     any
	}{{"the socket's /v1/status", status}, {"qd status --json", cli}, {"/api/overview", overview}} {
		k.add("run in flight", src.place, field(src.v, "runs")...)
		k.add("periodic schedule", src.place, field(src.v, "periodics")...)
		for _, a := range field(src.v, "agents") {
			k.add("last outcome", src.place, field(a, "last")...)
		}
	}
	k.add("lane", "qd lane list --json", MustJSON(t, "qd lane list", testkit.MustQD(t, qd, db, "lane", "list", "--json")).([]any)...)
	k.add("lane", "/api/overview", field(overview, "lanes")...)

	for fact, places := range map[string]int{"task": 5, "run": 3, "run in flight": 3, "periodic schedule": 3, "last outcome": 3, "lane": 2} {
		if got := len(k.seen[fact]); got != places {
			t.Errorf("a %s was read from %d places (%s), want %d", fact, got, strings.Join(k.seen[fact], ", "), places)
		}
	}
	t.Logf("fields: %v", k.first)
}
