package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func sampleReport() *Report {
	r := &Report{Size: "small", Started: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC), Seconds: 12}
	s := r.Section("claim", "Claims")
	base := *s.Add("baseline, 16 claimers", "claims_per_second", 5000, "/s")
	s.Add("qd Claim, 16 claimers", "claims_per_second", 3500, "/s").Against(base).Want(">=", 0.6)
	s.Add("qd Claim, 16 claimers", "p99_ms", 4.25, "ms")
	soak := r.Section("soak", "Soak")
	soak.Add("runs", "hot_update_share", 93.5, "%").Want(">=", 95)
	return r
}

func TestFigure_Want(t *testing.T) {
	// Ensure a target is judged on the ratio when there is one, else on the value.
	r := sampleReport()
	f, _ := r.Find("claim", "qd Claim, 16 claimers", "claims_per_second")
	if f.Ratio == nil || f.Ratio.Value != 0.7 || f.Ratio.Base != 5000 || !f.Target.Met || f.Target.OnValue {
		t.Fatalf("ratio %+v target %+v, want 0.7 of 5000, met, on the ratio", f.Ratio, f.Target)
	}
	h, _ := r.Find("soak", "runs", "hot_update_share")
	if h.Target.Met || !h.Target.OnValue {
		t.Fatalf("target %+v, want missed, on the value", h.Target)
	}
	var z Figure
	z.Against(Figure{Value: 0})
	if z.Ratio != nil {
		t.Fatalf("ratio against zero = %+v, want none", z.Ratio)
	}
}

func TestReport_Section(t *testing.T) {
	// Ensure a section is found again by id rather than added twice.
	r := sampleReport()
	r.Section("claim", "other title").Add("x", "y", 1, "/s")
	if len(r.Sections) != 2 || len(r.Sections[0].Rows) != 4 {
		t.Fatalf("sections %d, claim rows %d; want 2 and 4", len(r.Sections), len(r.Sections[0].Rows))
	}
}

func TestReport_WriteText(t *testing.T) {
	// Ensure the table shows values, ratios, and targets with their verdicts.
	var b bytes.Buffer
	if err := sampleReport().WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{"== Claims", "5,000 /s", "3,500 /s", "0.70×", "baseline, 16 claimers claims_per_second",
		">= 0.6× met", "4.250 ms", "93.5 %", ">= 95 MISSED"} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
}

func TestReport_WriteJSON(t *testing.T) {
	// Ensure the JSON keeps its field names, so scripts can rely on them.
	var b bytes.Buffer
	if err := sampleReport().WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Size     string `json:"size"`
		Sections []struct {
			ID      string `json:"id"`
			Figures []struct {
				Case   string  `json:"case"`
				Metric string  `json:"metric"`
				Value  float64 `json:"value"`
				Ratio  *struct {
					Value float64 `json:"value"`
				} `json:"ratio"`
				Target *struct {
					Op  string `json:"op"`
					Met bool   `json:"met"`
				} `json:"target"`
			} `json:"figures"`
		} `json:"sections"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	f := got.Sections[0].Figures[1]
	if got.Size != "small" || got.Sections[0].ID != "claim" || f.Metric != "claims_per_second" ||
		f.Value != 3500 || f.Ratio == nil || f.Ratio.Value != 0.7 || f.Target == nil || f.Target.Op != ">=" || !f.Target.Met {
		t.Fatalf("decoded %+v", got)
	}
}

func TestGroupThousands(t *testing.T) {
	// Ensure large figures read with separators.
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -12345: "-12,345"} {
		if got := groupThousands(n); got != want {
			t.Errorf("groupThousands(%d) = %q, want %q", n, got, want)
		}
	}
}
