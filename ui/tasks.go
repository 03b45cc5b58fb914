package ui

import (
	"context"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/qd-run/qd/api"
	"github.com/qd-run/qd/lease"
)

// pageSize is how many tasks one page of the listing shows.
const pageSize = 50

// TaskList is the tasks page and its JSON twin.
type TaskList struct {
	Filter TaskFilter `json:"filter"`
	Tasks  []api.Task `json:"tasks"`
	// Count is how many tasks the filter selects ("about" when Estimated).
	Count lease.Count `json:"count"`
	// Next is the query of the next page; empty on the last.
	Next template.URL `json:"next,omitempty"`
	// Query is the filter as a query string, without the page.
	Query template.URL `json:"-"`
	// TextCapped says the payload search looks only at the newest tasks.
	TextCapped int `json:"text_search_limit,omitempty"`
}

// TaskFilter is the filter of the tasks page, as the form has it.
type TaskFilter struct {
	State  string `json:"state,omitempty"`
	Lane   string `json:"lane,omitempty"`
	Agent  string `json:"agent,omitempty"`
	Text   string `json:"text,omitempty"`
	From   string `json:"from,omitempty"`
	To     string `json:"to,omitempty"`
	Before int64  `json:"before,omitempty"`
}

// textScanCap mirrors pg.TextScanCap for the page's words.
const textScanCap = 100_000

// parseFilter reads the filter from a query string or a posted form.
func parseFilter(v url.Values) (TaskFilter, lease.TaskQuery, error) {
	f := TaskFilter{State: v.Get("state"), Lane: strings.TrimSpace(v.Get("lane")), Agent: strings.TrimSpace(v.Get("agent")),
		Text: v.Get("text"), From: v.Get("from"), To: v.Get("to")}
	q := lease.TaskQuery{State: lease.TaskState(f.State), Lane: f.Lane, Agent: f.Agent, Text: f.Text, Limit: pageSize}
	switch q.State {
	case "", lease.TaskQueued, lease.TaskRunning, lease.TaskDone, lease.TaskFailed, lease.TaskCancelled:
	default:
		return f, q, badQuery("state %q is not one of queued, running, done, failed, cancelled", f.State)
	}
	var err error
	if q.From, err = parseTime(f.From); err != nil {
		return f, q, badQuery("from: %v", err)
	}
	if q.To, err = parseTime(f.To); err != nil {
		return f, q, badQuery("to: %v", err)
	}
	if b := v.Get("before"); b != "" {
		if f.Before, err = strconv.ParseInt(b, 10, 64); err != nil || f.Before < 1 {
			return f, q, badQuery("before %q is not a task id", b)
		}
		q.Before = f.Before
	}
	return f, q, nil
}

// parseTime reads a time as the form's datetime-local (this host's zone),
// RFC 3339, or an age back from now ("2h").
func parseTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		return time.Now().Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339, "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, badQuery("%q is not a time (2026-01-02T15:04, RFC 3339, or an age such as 2h)", s)
}

func (f TaskFilter) values() url.Values {
	v := url.Values{}
	for k, x := range map[string]string{"state": f.State, "lane": f.Lane, "agent": f.Agent, "text": f.Text, "from": f.From, "to": f.To} {
		if x != "" {
			v.Set(k, x)
		}
	}
	return v
}

func (s *server) tasks(r *http.Request) (any, error) {
	f, q, err := parseFilter(r.URL.Query())
	if err != nil {
		return nil, err
	}
	ts, err := s.o.Store.FindTasks(r.Context(), q)
	if err != nil {
		return nil, err
	}
	n := lease.Count{N: int64(len(ts))}
	if len(ts) == q.Limit || q.Before != 0 { // a first page that is not full is the count
		if n, err = s.o.Store.CountTasks(r.Context(), q); err != nil {
			return nil, err
		}
	}
	l := &TaskList{Filter: f, Tasks: list(ts, api.TaskOf), Count: n, Query: template.URL(f.values().Encode())}
	if q.Text != "" {
		l.TextCapped = textScanCap
	}
	if len(ts) == pageSize {
		v := f.values()
		v.Set("before", strconv.FormatInt(ts[len(ts)-1].ID, 10))
		l.Next = template.URL(v.Encode())
	}
	return l, nil
}

// Confirm is the question a bulk action asks first: how many tasks it
// would change.
type Confirm struct {
	Action string
	Verb   string
	Count  lease.Count
	Filter TaskFilter
	States string
}

// confirmBulk answers the bulk buttons of the tasks page with the number
// of tasks the action would change and a button that does it.
func (s *server) confirmBulk(w http.ResponseWriter, r *http.Request) {
	if s.o.ReadOnly {
		http.Error(w, readOnlyMessage, http.StatusForbidden)
		return
	}
	f, q, err := parseFilter(r.URL.Query())
	if err != nil {
		http.Error(w, scrub(err), http.StatusBadRequest)
		return
	}
	c := Confirm{Action: r.URL.Query().Get("action"), Filter: f}
	states := bulkStates[c.Action]
	if states == nil {
		http.Error(w, "action must be retry or cancel", http.StatusBadRequest)
		return
	}
	c.Verb = map[string]string{"retry": "Retry", "cancel": "Cancel"}[c.Action]
	c.States = map[string]string{"retry": "failed or cancelled", "cancel": "queued or running"}[c.Action]
	if f.State != "" && slices.Contains(states, lease.TaskState(f.State)) {
		c.States = f.State // the filter keeps only these
	}
	q.CountBudget = bulkCountBudget
	if c.Count, err = s.o.Store.CountTasks(r.Context(), q, states...); err != nil {
		http.Error(w, scrub(err), http.StatusInternalServerError)
		return
	}
	s.render(w, http.StatusOK, "confirm", "confirm", c)
}

// bulkCountBudget is how long the count of a bulk confirmation may take
// before it settles for an estimate: longer than a listing's, since the
// number is what the person confirms.
const bulkCountBudget = time.Second

var bulkStates = map[string][]lease.TaskState{
	"retry":  {lease.TaskFailed, lease.TaskCancelled},
	"cancel": {lease.TaskQueued, lease.TaskRunning},
}

// TaskPage is the task page and its JSON twin: the task and its runs as
// `qd show --json` has them, and the output of each run.
type TaskPage struct {
	Task api.Task `json:"task"`
	// ParentTask is the task whose run enqueued this one (Task.ParentRun),
	// null when none did or it is gone.
	ParentTask *int64      `json:"parent_task"`
	Runs       []api.Run   `json:"runs"`
	Outputs    []RunOutput `json:"outputs"`
	// Parents are the tasks it waits (or waited) for, Dependents those
	// that wait for it, each with its state.
	Parents    []api.Link `json:"parents"`
	Dependents []api.Link `json:"dependents"`
}

// RunOutput is the output of one run, as the task page shows it.
type RunOutput struct {
	RunID int64 `json:"run_id"`
	// Host is the host of the daemon that ran it.
	Host   string `json:"host"`
	Output string `json:"output"`
	// From says where Output comes from: the run's log file on this host
	// ("log file"), or the tail stored in the queue ("stored tail").
	From string `json:"output_from"`
}

// Attempt is one run of the task with its output, for the template.
type Attempt struct {
	api.Run
	RunOutput
}

// Duration is how long the run took, or has taken so far.
func (a Attempt) Duration() float64 {
	end := time.Now()
	if a.FinishedAt != nil {
		end = *a.FinishedAt
	}
	return end.Sub(a.StartedAt).Seconds()
}

// Attempts pairs each run with its output.
func (p *TaskPage) Attempts() []Attempt {
	out := make([]Attempt, len(p.Runs))
	for i, r := range p.Runs {
		out[i] = Attempt{Run: r, RunOutput: p.Outputs[i]}
	}
	return out
}

// maxOutput is how much of a run's log the task page shows: the end.
const maxOutput = 256 << 10

func (s *server) task(r *http.Request) (any, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, badQuery("task id %q is not a number", r.PathValue("id"))
	}
	t, err := s.o.Store.Task(r.Context(), id)
	if err != nil {
		return nil, err
	}
	runs, err := s.o.Store.Runs(r.Context(), lease.RunFilter{TaskID: id})
	if err != nil {
		return nil, err
	}
	parents, dependents, err := s.o.Store.Chain(r.Context(), id)
	if err != nil {
		return nil, err
	}
	daemons := s.daemonsByName(r.Context())
	p := &TaskPage{Task: api.TaskOf(t), Runs: list(runs, api.RunOf), Outputs: []RunOutput{},
		Parents: list(parents, api.LinkOf), Dependents: list(dependents, api.LinkOf)}
	if t.ParentRun != 0 {
		if parent, err := s.o.Store.Run(r.Context(), t.ParentRun); err == nil {
			p.ParentTask = &parent.TaskID
		}
	}
	for _, run := range runs {
		d := daemons[run.Owner]
		o := RunOutput{RunID: run.ID, Host: d.Host}
		o.Output, o.From = s.output(run, d)
		p.Outputs = append(p.Outputs, o)
	}
	return p, nil
}

func (s *server) daemonsByName(ctx context.Context) map[string]Daemon {
	out := map[string]Daemon{}
	if s.o.Daemons == nil {
		return out
	}
	ds, err := s.o.Daemons(ctx)
	if err != nil {
		return out
	}
	for _, d := range ds {
		out[d.Name] = d
	}
	return out
}

// output is the end of run's log file when its daemon is on this host and
// the file holds all of it, else the tail stored on the run.
func (s *server) output(run lease.Run, d Daemon) (string, string) {
	if s.o.LogPath != nil && d.StateDir != "" && d.Host == s.o.Hostname && run.LogError == "" {
		if f, err := os.Open(s.o.LogPath(d.StateDir, run.ID)); err == nil {
			defer f.Close()
			if fi, err := f.Stat(); err == nil && fi.Size() > maxOutput {
				_, _ = f.Seek(fi.Size()-maxOutput, io.SeekStart)
			}
			b, err := io.ReadAll(io.LimitReader(f, maxOutput))
			if err == nil {
				return strings.ToValidUTF8(string(b), "\uFFFD"), "log file"
			}
		}
	}
	return run.OutputTail, "stored tail"
}
