package ui

import (
	"fmt"
	"html"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

// The timeline's drawing, in SVG user units.
const (
	timelineWidth = 1000.0
	labelWidth    = 120.0
	rowHeight     = 26.0
	barHeight     = 18.0
	axisHeight    = 22.0
	// maxBars caps the runs drawn; the page says when more ran.
	maxBars = 3000
)

// ranges are the windows the timeline and throughput pages offer, each
// with its throughput bucket.
var ranges = map[string]struct {
	span, bucket time.Duration
	per          string
}{
	"hour": {time.Hour, time.Minute, "minute"},
	"day":  {24 * time.Hour, 5 * time.Minute, "5 minutes"},
	"week": {7 * 24 * time.Hour, 30 * time.Minute, "30 minutes"},
}

// Timeline is the timeline page: one row per lane, a bar per run.
type Timeline struct {
	From   time.Time     `json:"from"`
	To     time.Time     `json:"to"`
	Range  string        `json:"range,omitempty"`
	Lanes  []TimelineRow `json:"lanes"`
	Total  lease.Count   `json:"runs_started"`
	Shown  int           `json:"runs_shown"`
	Ticks  []Tick        `json:"-"`
	Height float64       `json:"-"`
	// Chain, when set, is the task whose chain the timeline shows alone.
	Chain int64 `json:"chain,omitempty"`
	// The queries of the zoom and pan links.
	ZoomIn, ZoomOut, Earlier, Later template.URL `json:"-"`
}

// TimelineRow is one lane of the timeline.
type TimelineRow struct {
	Lane string  `json:"lane"`
	Y    float64 `json:"-"`
	// Height grows with the runs that overlapped: each gets a track.
	Height float64 `json:"-"`
	Bars   []Bar   `json:"runs"`
	// Markup is the row's bars as SVG, written in Go: a template would take
	// most of the page's time for thousands of bars.
	Markup template.HTML `json:"-"`
	ends   []time.Time
}

// Bar is one run on the timeline: its span, not the whole run. EndedAt is
// null while it runs.
type Bar struct {
	RunID     int64      `json:"run_id"`
	TaskID    int64      `json:"task_id"`
	Agent     string     `json:"agent"`
	Attempt   int        `json:"attempt"`
	Outcome   string     `json:"outcome"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at"`
	Summary   string     `json:"summary"`
	X, W, Y   float64    `json:"-"`
}

// Tick is a label of the time axis.
type Tick struct {
	X      float64
	Label  string
	Anchor string // text-anchor: the end ticks stay inside the chart
}

// window reads the page's window: ?from=&to= (unix milliseconds or RFC
// 3339), else ?range= (hour, day or week) ending now.
func window(v url.Values) (from, to time.Time, name string, err error) {
	if v.Get("from") != "" || v.Get("to") != "" {
		if from, err = parseInstant(v.Get("from")); err != nil {
			return from, to, "", badQuery("from: %v", err)
		}
		if to, err = parseInstant(v.Get("to")); err != nil {
			return from, to, "", badQuery("to: %v", err)
		}
		if !to.After(from) {
			return from, to, "", badQuery("to must be after from")
		}
		if to.Sub(from) > 31*24*time.Hour {
			return from, to, "", badQuery("the window is at most 31 days")
		}
		return from, to, "", nil
	}
	name = v.Get("range")
	if name == "" {
		name = "hour"
	}
	r, ok := ranges[name]
	if !ok {
		return from, to, "", badQuery("range %q is not hour, day or week", name)
	}
	to = time.Now()
	return to.Add(-r.span), to, name, nil
}

func parseInstant(s string) (time.Time, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.UnixMilli(ms), nil
	}
	return time.Parse(time.RFC3339, s)
}

func windowQuery(from, to time.Time) template.URL {
	return template.URL(url.Values{"from": {strconv.FormatInt(from.UnixMilli(), 10)}, "to": {strconv.FormatInt(to.UnixMilli(), 10)}}.Encode())
}

func (s *server) timeline(r *http.Request) (any, error) {
	if c := r.URL.Query().Get("chain"); c != "" {
		id, err := strconv.ParseInt(c, 10, 64)
		if err != nil || id <= 0 {
			return nil, badQuery("chain %q is not a task id", c)
		}
		return s.chainTimeline(r.Context(), r.URL.Query(), id)
	}
	from, to, name, err := window(r.URL.Query())
	if err != nil {
		return nil, err
	}
	runs, total, err := s.o.Store.RunsBetween(r.Context(), from, to, maxBars)
	if err != nil {
		return nil, err
	}
	lanes, err := s.o.Store.Lanes(r.Context())
	if err != nil {
		return nil, err
	}
	return layout(from, to, name, runs, lanes, total), nil
}

// layout places each run as a bar in its lane's row.
func layout(from, to time.Time, name string, runs []lease.Run, lanes []lease.Lane, total lease.Count) *Timeline {
	tl := &Timeline{From: from, To: to, Range: name, Total: total, Shown: len(runs), Lanes: []TimelineRow{}}
	span := to.Sub(from)
	x := func(t time.Time) float64 {
		f := float64(t.Sub(from)) / float64(span)
		return labelWidth + min(max(f, 0), 1)*(timelineWidth-labelWidth)
	}
	rows := map[string]*TimelineRow{}
	for _, l := range lanes {
		rows[l.Name] = &TimelineRow{Lane: l.Name, Bars: []Bar{}}
	}
	sort.Slice(runs, func(i, j int) bool { return runs[i].StartedAt.Before(runs[j].StartedAt) })
	for _, run := range runs {
		row, ok := rows[run.Lane]
		if !ok {
			row = &TimelineRow{Lane: run.Lane}
			rows[run.Lane] = row
		}
		end := run.FinishedAt
		if end.IsZero() {
			end = to
		}
		b := Bar{RunID: run.ID, TaskID: run.TaskID, Agent: run.Agent, Attempt: run.Attempt, Outcome: string(run.State),
			StartedAt: run.StartedAt, EndedAt: api.When(run.FinishedAt), Summary: run.Summary, X: x(run.StartedAt)}
		b.W = max(x(end)-b.X, 1.5)
		// The first track free at the run's start, by the clock: runs that
		// only touch (one ends as the next starts, as a lane of limit 1
		// runs them) share a track, whatever their bars' least width.
		track := 0
		for track < len(row.ends) && row.ends[track].After(run.StartedAt) {
			track++
		}
		if track == len(row.ends) {
			row.ends = append(row.ends, time.Time{})
		}
		row.ends[track] = end
		b.Y = float64(track) * barHeight
		row.Bars = append(row.Bars, b)
	}
	names := make([]string, 0, len(rows))
	for n := range rows {
		names = append(names, n)
	}
	sort.Strings(names)
	y := axisHeight
	for _, n := range names {
		row := rows[n]
		row.Y = y
		row.Height = rowHeight + float64(max(len(row.ends), 1)-1)*barHeight
		for i := range row.Bars {
			row.Bars[i].Y += y + (rowHeight-barHeight)/2
		}
		row.Markup = barsSVG(row.Bars)
		y += row.Height
		tl.Lanes = append(tl.Lanes, *row)
	}
	tl.Height = y + 4
	for i := 0; i <= 6; i++ {
		t := from.Add(span * time.Duration(i) / 6)
		layout := "15:04"
		if span > 36*time.Hour {
			layout = "Jan 2 15:04"
		} else if span < 10*time.Minute {
			layout = "15:04:05"
		}
		anchor := "middle"
		switch i {
		case 0:
			anchor = "start"
		case 6:
			anchor = "end"
		}
		tl.Ticks = append(tl.Ticks, Tick{X: x(t), Label: t.Local().Format(layout), Anchor: anchor})
	}
	mid, quarter := from.Add(span/2), span/4
	tl.ZoomIn = windowQuery(mid.Add(-quarter), mid.Add(quarter))
	tl.ZoomOut = windowQuery(from.Add(-span/2), to.Add(span/2))
	tl.Earlier = windowQuery(from.Add(-span/2), to.Add(-span/2))
	tl.Later = windowQuery(from.Add(span/2), to.Add(span/2))
	return tl
}

// Throughput is the throughput page: runs finished per bucket by outcome,
// and the queue wait's percentiles.
type Throughput struct {
	From    time.Time        `json:"from"`
	To      time.Time        `json:"to"`
	Range   string           `json:"range"`
	Bucket  float64          `json:"bucket_seconds"`
	Per     string           `json:"-"` // the bucket in words: "minute", "5 minutes"
	Buckets []BucketRow      `json:"buckets"`
	Chart   chartData        `json:"-"`
	Totals  map[string]int64 `json:"totals"`
	// WaitSample: the wait percentiles come from 1 in WaitSample runs.
	WaitSample int64 `json:"wait_sample"`
}

// chartData is what the page's charts plot, as uPlot takes it: columns.
type chartData struct {
	Bucket   string      `json:"bucket"`
	Times    []int64     `json:"t"`
	Outcomes []string    `json:"outcomes"`
	Finished [][]int64   `json:"finished"`
	Wait     [][]float64 `json:"wait"`
	// Agents are the agents that reported usage in the window, and
	// Usage[i] their usage per bucket; both empty when none did.
	Agents []string    `json:"agents"`
	Usage  [][]float64 `json:"usage"`
}

var outcomes = []lease.RunState{lease.RunCompleted, lease.RunFailed, lease.RunAbandoned, lease.RunCancelled}

func (s *server) throughput(r *http.Request) (any, error) {
	name := r.URL.Query().Get("range")
	if name == "" {
		name = "hour"
	}
	rg, ok := ranges[name]
	if !ok {
		return nil, badQuery("range %q is not hour, day or week", name)
	}
	to := time.Now().Truncate(rg.bucket).Add(rg.bucket)
	from := to.Add(-rg.span)
	bs, err := s.o.Store.Throughput(r.Context(), from, to, rg.bucket)
	if err != nil {
		return nil, err
	}
	tp := &Throughput{From: from, To: to, Range: name, Bucket: rg.bucket.Seconds(), Per: rg.per, Totals: map[string]int64{}}
	c := chartData{Bucket: rg.per, Finished: make([][]int64, len(outcomes)), Wait: make([][]float64, 3)}
	for _, o := range outcomes {
		c.Outcomes = append(c.Outcomes, string(o))
	}
	for _, b := range bs {
		tp.Buckets = append(tp.Buckets, BucketRow{At: b.At, Finished: b.Finished, Started: b.Started,
			WaitP50: b.WaitP50, WaitP90: b.WaitP90, WaitP99: b.WaitP99, Usage: b.Usage})
		c.Times = append(c.Times, b.At.Unix())
		for i, o := range outcomes {
			c.Finished[i] = append(c.Finished[i], b.Finished[o])
			tp.Totals[string(o)] += b.Finished[o]
		}
		c.Wait[0] = append(c.Wait[0], b.WaitP50)
		c.Wait[1] = append(c.Wait[1], b.WaitP90)
		c.Wait[2] = append(c.Wait[2], b.WaitP99)
	}
	c.Agents, c.Usage = usageSeries(bs)
	tp.Chart = c
	if len(bs) > 0 {
		tp.WaitSample = bs[0].WaitSample
	}
	return tp, nil
}

// usageSeries is the usage chart's columns: the agents that reported any
// in bs, by name, and each one's usage per bucket.
func usageSeries(bs []lease.Bucket) ([]string, [][]float64) {
	seen := map[string]bool{}
	for _, b := range bs {
		for a := range b.Usage {
			seen[a] = true
		}
	}
	agents := make([]string, 0, len(seen))
	for a := range seen {
		agents = append(agents, a)
	}
	sort.Strings(agents)
	usage := make([][]float64, len(agents))
	for i, a := range agents {
		usage[i] = make([]float64, len(bs))
		for k, b := range bs {
			usage[i][k] = b.Usage[a]
		}
	}
	return agents, usage
}

// barsSVG writes each bar as a link to its task around a rect with a
// tooltip. Every text is escaped; the numbers and the outcome (one of the
// run states) need none.
func barsSVG(bars []Bar) template.HTML {
	var b strings.Builder
	for _, bar := range bars {
		title := fmt.Sprintf("run %d · task %d · %s attempt %d · %s · %s–%s", bar.RunID, bar.TaskID, bar.Agent, bar.Attempt,
			bar.Outcome, when(bar.StartedAt), when(bar.EndedAt))
		if bar.Summary != "" {
			title += " · " + visible(bar.Summary)
		}
		fmt.Fprintf(&b, `<a href="/tasks/%d"><rect class="run %s" data-run="%d" x="%.1f" y="%.1f" width="%.1f" height="17"><title>%s</title></rect></a>`,
			bar.TaskID, html.EscapeString(bar.Outcome), bar.RunID, bar.X, bar.Y, bar.W, html.EscapeString(title))
	}
	return template.HTML(b.String())
}
