package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/pg"
	"github.com/qd-run/qd/ui"
)

// MustInsertPayload writes a task with payload text straight into the
// tasks table, past every check of an enqueue, as an older qd or a hand
// with psql could have.
func MustInsertPayload(tb testing.TB, p *pg.Provider, lane, payload string) int64 {
	tb.Helper()
	MustEnqueueJSON(tb, p, lane, `{}`) // the lane
	var id int64
	err := p.Pool().QueryRow(context.Background(), fmt.Sprintf(`INSERT INTO %s.tasks (lane, agent, payload, payload_text, max_attempts)
		VALUES ($1, 'w', $2::jsonb, $2, 1) RETURNING id`, p.Schema()), lane, payload).Scan(&id)
	if err != nil {
		tb.Fatalf("insert task: %v", err)
	}
	return id
}

// Ensure a payload nested deeper than the limit is refused by the
// enqueue form, and one already stored (10,000 nested arrays, 20 KB)
// keeps its task page small and the listings whole: the JSON twins answer
// valid JSON with the payload as text and a note.
func TestUI_DeepPayload(t *testing.T) {
	p, _ := MustProvider(t)
	base := MustServer(t, p, ui.Options{})
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	code, body := MustPost(t, base, "/actions/enqueue", url.Values{"agent": {"w"}, "lane": {"form"}, "payload": {deep}},
		"Sec-Fetch-Site", "same-origin")
	if code != http.StatusBadRequest || !strings.Contains(body, "limit of 64") {
		t.Errorf("enqueue of a payload 10000 levels deep: status %d, %.200s; want 400 naming the limit", code, body)
	}

	id := MustInsertPayload(t, p, "deep", deep)
	code, page := MustGet(t, base, fmt.Sprintf("/tasks/%d", id))
	if code != http.StatusOK || len(page) > 200<<10 || !strings.Contains(page, "nests 10000 levels deep") {
		t.Errorf("task page of a stored deep payload: status %d, %d bytes; want 200, under 200 KiB, with a note", code, len(page))
	}
	for _, path := range []string{"/api/tasks", fmt.Sprintf("/api/tasks/%d", id), "/api/overview"} {
		code, body := MustGet(t, base, path)
		if code != http.StatusOK || !json.Valid([]byte(body)) || !strings.Contains(body, "payload_note") {
			t.Errorf("GET %s with a stored deep payload: status %d, %d bytes, valid JSON %v; want 200, valid, with payload_note",
				path, code, len(body), json.Valid([]byte(body)))
		}
	}
	var list ui.TaskList
	_, body = MustGet(t, base, "/api/tasks?lane=deep")
	if err := json.Unmarshal([]byte(body), &list); err != nil || len(list.Tasks) != 2 {
		t.Fatalf("listing of lane deep: %v, %d tasks", err, len(list.Tasks))
	}
	var text string
	if err := json.Unmarshal(list.Tasks[0].Payload, &text); err != nil || text != deep {
		t.Errorf("deep payload in the listing is not its text as a string: %v", err)
	}
}

// Ensure the task page shows at most a bounded part of a payload whose
// indented text would be much larger than itself: 1 MiB of arrays 64
// levels deep indent to some 60 MB.
func TestUI_PrettyPayloadCapped(t *testing.T) {
	p, _ := MustProvider(t)
	base := MustServer(t, p, ui.Options{})
	unit := strings.Repeat("[", lease.MaxPayloadDepth-1) + "0" + strings.Repeat("]", lease.MaxPayloadDepth-1)
	payload := "[" + strings.Repeat(unit+",", (lease.MaxPayloadBytes-200)/(len(unit)+1)) + "0]"
	id := MustEnqueueJSON(t, p, "wide", payload)
	code, page := MustGet(t, base, fmt.Sprintf("/tasks/%d", id))
	if code != http.StatusOK || len(page) > 300<<10 || !strings.Contains(page, "cut at 64 KiB") {
		t.Errorf("task page of a 1 MiB payload 64 levels deep: status %d, %d bytes; want 200, under 300 KiB, saying where it was cut", code, len(page))
	}
}
