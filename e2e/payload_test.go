package e2e

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/qd-run/qd/internal/testkit"
)

// Ensure `qd enqueue` refuses a payload nested past the limit with exit 2
// and the limit, and that one already stored deeper (written with SQL)
// leaves `qd tasks` and `qd show` working: the payload comes as its text,
// with a note.
func TestPayload_Depth(t *testing.T) {
	qd, db := testkit.MustQueue(t)
	deep := strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	_, errOut, code := testkit.QDStdin(t, qd, db, deep, "enqueue", "--lane", "deep", "--agent", "w", "-")
	if code != 2 || !strings.Contains(errOut, "nests 10000 levels deep, more than the limit of 64") {
		t.Errorf("qd enqueue of 10000 nested arrays: exit %d, %q; want 2 naming the limit", code, errOut)
	}
	testkit.MustQD(t, qd, db, "enqueue", "--lane", "deep", "--agent", "w", `{"ok":true}`)
	u, _ := url.Parse(db)
	pool := testkit.MustPool(t)
	var id string
	if err := pool.QueryRow(context.Background(), `INSERT INTO `+u.Query().Get("schema")+`.tasks (lane, agent, payload, payload_text, max_attempts)
		VALUES ('deep', 'w', $1::jsonb, $1, 1) RETURNING id::text`, deep).Scan(&id); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := testkit.QD(t, qd, db, "tasks", "--json")
	var tasks []struct {
		ID          int64           `json:"id"`
		Payload     json.RawMessage `json:"payload"`
		PayloadNote string          `json:"payload_note"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &tasks) != nil || len(tasks) != 2 {
		t.Fatalf("qd tasks with a stored deep payload: exit %d, %d tasks: %s", code, len(tasks), errOut)
	}
	var text string
	if json.Unmarshal(tasks[0].Payload, &text) != nil || text != deep || !strings.Contains(tasks[0].PayloadNote, "limit of 64") {
		t.Errorf("qd tasks: the deep payload is not its text with a note: %.80s, note %q", tasks[0].Payload, tasks[0].PayloadNote)
	}
	var ok struct{ OK bool }
	if json.Unmarshal(tasks[1].Payload, &ok) != nil || !ok.OK || tasks[1].PayloadNote != "" {
		t.Errorf("qd tasks: a payload within the limit changed: %s, note %q", tasks[1].Payload, tasks[1].PayloadNote)
	}
	out, errOut, code = testkit.QD(t, qd, db, "show", id, "--json")
	if code != 0 || !json.Valid([]byte(out)) || !strings.Contains(out, `"payload_note"`) {
		t.Errorf("qd show of the deep task: exit %d, %d bytes, %s", code, len(out), errOut)
	}
}
