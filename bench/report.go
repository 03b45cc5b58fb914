package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
	"unicode/utf8"
)

// Report is the outcome of one bench run. Its JSON field names are stable:
// scripts may compare reports across runs by section id, case and metric.
type Report struct {
	Size        string      `json:"size"`
	Started     time.Time   `json:"started"`
	Seconds     float64     `json:"elapsed_seconds"`
	Environment Environment `json:"environment"`
	Sections    []*Section  `json:"sections"`
}

// Environment records what the figures were measured on.
type Environment struct {
	Postgres          string  `json:"postgres"`
	SynchronousCommit string  `json:"synchronous_commit"`
	SharedBuffers     string  `json:"shared_buffers"`
	Autovacuum        string  `json:"autovacuum"`
	CPUs              int     `json:"cpus"`
	GoVersion         string  `json:"go_version"`
	MeasureSeconds    float64 `json:"measure_seconds"`
	// LoadBefore and LoadAfter are the machine's load averages (1, 5 and
	// 15 minutes) when the run started and ended, where the system tells.
	LoadBefore string `json:"load_average_before,omitempty"`
	LoadAfter  string `json:"load_average_after,omitempty"`
}

// Section is one group of figures, such as the claim comparison. Sections
// are added by id; later parts of the bench (end to end through the daemon,
// idle cost) add their own.
type Section struct {
	ID    string   `json:"id"`
	Title string   `json:"title"`
	Shape string   `json:"shape,omitempty"` // how the figures were taken
	Rows  []Figure `json:"figures"`
}

// Figure is one measured value, optionally with its ratio to a reference
// measured in the same run and the target that ratio (or value) is held to.
type Figure struct {
	Case   string  `json:"case"`   // "qd claim, 16 claimers"
	Metric string  `json:"metric"` // "claims_per_second", "p99_ms"
	Value  float64 `json:"value"`
	Unit   string  `json:"unit"`
	Ratio  *Ratio  `json:"ratio,omitempty"`
	Target *Target `json:"target,omitempty"`
}

// Ratio is Value divided by the value of another figure of this run.
type Ratio struct {
	Value float64 `json:"value"`
	// Case and Metric name the reference figure; Base is its value.
	Case   string  `json:"case"`
	Metric string  `json:"metric"`
	Base   float64 `json:"base"`
}

// Against names the reference figure for people.
func (r *Ratio) Against() string { return r.Case + " " + r.Metric }

// Target is a goal for a figure: its ratio (or its value when OnValue)
// compared with Bound by Op (">=" or "<=").
type Target struct {
	Op      string  `json:"op"`
	Bound   float64 `json:"bound"`
	OnValue bool    `json:"on_value,omitempty"`
	Met     bool    `json:"met"`
}

// Section returns the section with id, adding it when missing.
func (r *Report) Section(id, title string) *Section {
	for _, s := range r.Sections {
		if s.ID == id {
			return s
		}
	}
	s := &Section{ID: id, Title: title}
	r.Sections = append(r.Sections, s)
	return s
}

// Find returns the figure of section id (any section when id is empty)
// with case c and metric m.
func (r *Report) Find(id, c, m string) (Figure, bool) {
	for _, s := range r.Sections {
		if id != "" && s.ID != id {
			continue
		}
		for _, f := range s.Rows {
			if f.Case == c && f.Metric == m {
				return f, true
			}
		}
	}
	return Figure{}, false
}

// Add appends a figure and returns a pointer to it for chaining a ratio or
// a target.
func (s *Section) Add(c, metric string, v float64, unit string) *Figure {
	s.Rows = append(s.Rows, Figure{Case: c, Metric: metric, Value: v, Unit: unit})
	return &s.Rows[len(s.Rows)-1]
}

// Against sets f's ratio to base, a figure measured in the same run. A
// base of zero gives no ratio.
func (f *Figure) Against(base Figure) *Figure {
	if base.Value == 0 {
		return f
	}
	f.Ratio = &Ratio{Value: f.Value / base.Value, Case: base.Case, Metric: base.Metric, Base: base.Value}
	return f
}

// Want sets a target on the ratio (or on the value when the figure has no
// ratio) and records whether it is met.
func (f *Figure) Want(op string, bound float64) *Figure {
	t := &Target{Op: op, Bound: bound, OnValue: f.Ratio == nil}
	v := f.Value
	if f.Ratio != nil {
		v = f.Ratio.Value
	}
	switch op {
	case ">=":
		t.Met = v >= bound
	case "<=":
		t.Met = v <= bound
	default:
		panic("bench: unknown target op " + op)
	}
	f.Target = t
	return f
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// WriteText writes the report as aligned tables, one per section.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	e := r.Environment
	fmt.Fprintf(&b, "qdbench, size %s, %s, %.0f s\n", r.Size, r.Started.UTC().Format(time.RFC3339), r.Seconds)
	fmt.Fprintf(&b, "%s; %d CPUs; synchronous_commit=%s shared_buffers=%s autovacuum=%s; %s; %.1f s per measurement\n",
		e.Postgres, e.CPUs, e.SynchronousCommit, e.SharedBuffers, e.Autovacuum, e.GoVersion, e.MeasureSeconds)
	if e.LoadBefore != "" {
		fmt.Fprintf(&b, "load average before: %s, after: %s\n", e.LoadBefore, e.LoadAfter)
	}
	for _, s := range r.Sections {
		fmt.Fprintf(&b, "\n== %s\n", s.Title)
		if s.Shape != "" {
			fmt.Fprintf(&b, "   %s\n", s.Shape)
		}
		rows := [][]string{{"case", "metric", "value", "ratio", "against", "target"}}
		for _, f := range s.Rows {
			rows = append(rows, []string{f.Case, f.Metric, formatValue(f.Value, f.Unit),
				formatRatio(f.Ratio), against(f.Ratio), formatTarget(f.Target)})
		}
		writeColumns(&b, rows, []bool{false, false, true, true, false, false})
	}
	// Every target again, in one table.
	rows := [][]string{{"section", "case", "metric", "value", "ratio", "target"}}
	for _, s := range r.Sections {
		for _, f := range s.Rows {
			if f.Target != nil {
				rows = append(rows, []string{s.ID, f.Case, f.Metric, formatValue(f.Value, f.Unit), formatRatio(f.Ratio), formatTarget(f.Target)})
			}
		}
	}
	if len(rows) > 1 {
		b.WriteString("\n== Targets\n")
		writeColumns(&b, rows, []bool{false, false, false, true, true, false})
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatValue(v float64, unit string) string {
	switch {
	case unit == "%":
		return fmt.Sprintf("%.1f %%", v)
	case unit == "ms":
		return fmt.Sprintf("%.3f ms", v)
	case math.Abs(v) >= 100 || v == math.Trunc(v):
		return groupThousands(int64(math.Round(v))) + " " + unit
	}
	return fmt.Sprintf("%.2f %s", v, unit)
}

func formatRatio(r *Ratio) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%.2f×", r.Value)
}

func against(r *Ratio) string {
	if r == nil {
		return ""
	}
	return r.Against()
}

func formatTarget(t *Target) string {
	if t == nil {
		return ""
	}
	verdict := "met"
	if !t.Met {
		verdict = "MISSED"
	}
	suffix := "×"
	if t.OnValue {
		suffix = ""
	}
	return fmt.Sprintf("%s %g%s %s", t.Op, t.Bound, suffix, verdict)
}

// groupThousands formats n with commas between groups of three digits.
func groupThousands(n int64) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// writeColumns writes rows as space-separated columns, right-aligning the
// columns marked in right.
func writeColumns(b *strings.Builder, rows [][]string, right []bool) {
	width := make([]int, len(right))
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, r := range rows {
		var line strings.Builder
		for i, c := range r {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if right[i] {
				line.WriteString(pad + c)
			} else {
				line.WriteString(c + pad)
			}
			line.WriteString("  ")
		}
		b.WriteString("  " + strings.TrimRight(line.String(), " ") + "\n")
	}
}
