package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/qd-run/qd/lease"
	"github.com/qd-run/qd/ui"
)

// Ensure the throughput page shows what the agents' runs reported
// spending (qd usage) over time, by agent: in its JSON twin per bucket,
// and as the columns its usage chart draws; and that a window where no
// run reported any draws no usage chart.
func TestUI_ThroughputUsage(t *testing.T) {
	p, _ := MustProvider(t)
	base := MustServer(t, p, ui.Options{})
	code, body := MustGet(t, base, "/throughput")
	if code != http.StatusOK || !strings.Contains(body, `"agents":[]`) {
		t.Errorf("throughput page with no usage: status %d, want a chart of no agents:\n%.2000s", code, body)
	}

	ctx := context.Background()
	for i, amount := range []float64{0.25, 0.5, 1.25} {
		MustEnqueueJSON(t, p, "spend", `{}`)
		l, err := p.Claim(ctx, lease.ClaimParams{Lanes: []string{"spend"}, Owner: "tester"})
		if err != nil {
			t.Fatalf("claim %d: %v", i, err)
		}
		if _, err := p.RecordUsage(ctx, lease.Usage{RunID: l.RunID, Amount: amount, Note: "tokens"}); err != nil {
			t.Fatalf("record usage of run %d: %v", l.RunID, err)
		}
		if _, err := p.Settle(ctx, lease.Settlement{RunID: l.RunID, Outcome: lease.RunCompleted}); err != nil {
			t.Fatalf("settle run %d: %v", l.RunID, err)
		}
	}
	MustEnqueueJSON(t, p, "spend", `{}`)
	MustFinish(t, p, "spend", lease.RunFailed, "no usage", "") // a run that reported none: nothing

	_, body = MustGet(t, base, "/api/throughput")
	var tp ui.Throughput
	if err := json.Unmarshal([]byte(body), &tp); err != nil {
		t.Fatalf("/api/throughput: %v: %.300s", err, body)
	}
	total := 0.0
	for _, b := range tp.Buckets {
		for agent, u := range b.Usage {
			if agent != "w" {
				t.Errorf("usage of agent %q, which reported none", agent)
			}
			total += u
		}
	}
	if total != 2.0 {
		t.Errorf("usage over the hour: %v, want the 2.0 the three runs reported", total)
	}
	_, body = MustGet(t, base, "/throughput")
	if !strings.Contains(body, `"agents":["w"]`) || !strings.Contains(body, `id="chart-usage"`) {
		t.Errorf("throughput page does not chart agent w's usage:\n%.3000s", body)
	}
}
